/** A node of `EXPLAIN (FORMAT JSON)`, as the plan specs read it. Test support: never built into dist/. */
export interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Index Cond'?: string;
  Plans?: PlanNode[];
}

/** The plan's nodes, depth first. */
export const nodes = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(nodes)];
