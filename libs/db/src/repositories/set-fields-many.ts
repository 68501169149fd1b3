import type { EntityManager, EntityTarget } from 'typeorm';

/**
 * Sets fields of many rows the caller's transaction has loaded and locked, set-based: one UPDATE
 * per distinct set of columns (rows of one batch usually share it), like `update(row.id, fields)`
 * row by row (also `updated_at`). Each entity object gets its fields too. Throws unless every row
 * was updated.
 */
export async function setFieldsMany<E extends { id: string }>(
  m: EntityManager,
  target: EntityTarget<E>,
  items: readonly { row: E; fields: Partial<E> }[],
): Promise<void> {
  const meta = m.connection.getMetadata(target);
  const groups = new Map<string, { row: E; fields: Partial<E> }[]>();
  for (const item of items) {
    const key = Object.keys(item.fields).sort().join(',');
    groups.set(key, [...(groups.get(key) ?? []), item]);
  }
  for (const [key, group] of groups) {
    if (key === '') continue;
    const columns = key.split(',').map((prop) => {
      const column = meta.findColumnWithPropertyName(prop);
      if (!column) throw new Error(`setFieldsMany: ${meta.tableName} has no column for ${prop}`);
      const type = m.connection.driver.normalizeType(column);
      // Character columns come in as text (an unsized `character` would be char(1)); assignment casts them.
      const recordType = /char|text/.test(type) ? 'text' : type;
      return { prop, name: column.databaseName, recordType };
    });
    const sets = columns.map((c) => `"${c.name}" = x."${c.name}"`);
    if (meta.updateDateColumn) sets.push(`"${meta.updateDateColumn.databaseName}" = now()`);
    const defs = ['id uuid', ...columns.map((c) => `"${c.name}" ${c.recordType}`)];
    const values = group.map(({ row, fields }) => {
      const value: Record<string, unknown> = { id: row.id };
      for (const c of columns) value[c.name] = (fields as Record<string, unknown>)[c.prop] ?? null;
      return value;
    });
    const [, updated]: [unknown, number] = await m.query(
      `UPDATE "${meta.tableName}" AS t SET ${sets.join(', ')}
         FROM jsonb_to_recordset($1::jsonb) AS x(${defs.join(', ')})
        WHERE t.id = ANY($2::uuid[]) AND t.id = x.id`,
      [JSON.stringify(values), group.map(({ row }) => row.id)],
    );
    if (updated !== group.length) {
      throw new Error(`setFieldsMany: ${updated} of ${group.length} ${meta.tableName} rows updated`);
    }
    for (const { row, fields } of group) Object.assign(row, fields);
  }
}
