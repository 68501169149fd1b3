import {
  ArcElement,
  BarController,
  BarElement,
  CategoryScale,
  Chart,
  DoughnutController,
  Legend,
  LinearScale,
  LineController,
  LineElement,
  PointElement,
  Tooltip,
  type ChartConfiguration,
} from 'chart.js';
import type { ComponentChildren } from 'preact';
import { useEffect, useRef } from 'preact/hooks';
import { downloadCsv } from './csv';

Chart.register(
  ArcElement,
  BarController,
  BarElement,
  CategoryScale,
  DoughnutController,
  Legend,
  LinearScale,
  LineController,
  LineElement,
  PointElement,
  Tooltip,
);
// No animation: screenshots and reduced-motion users see the final chart at once.
Chart.defaults.animation = false;
Chart.defaults.color = '#1f2933';

/** Colours with at least 3:1 contrast against white (WCAG non-text contrast). */
export const PALETTE = ['#1d4ed8', '#b45309', '#047857', '#b91c1c', '#6d28d9', '#0e7490', '#4d7c0f', '#9d174d'];

/** A chart with its text alternative: role=img and a label; the same data is in a table next to it. */
export function ChartBox({ title, config }: { title: string; config: ChartConfiguration }) {
  const canvas = useRef<HTMLCanvasElement>(null);
  useEffect(() => {
    if (!canvas.current) return;
    const chart = new Chart(canvas.current, { ...config, options: { ...config.options, maintainAspectRatio: false } });
    return () => chart.destroy();
  }, [JSON.stringify(config.data)]);
  return (
    <figure class="chart">
      <figcaption>{title}</figcaption>
      <div class="chart-area">
        <canvas ref={canvas} role="img" aria-label={`${title} (the table below has the same figures)`} />
      </div>
    </figure>
  );
}

export interface Column<R> {
  title: string;
  value: (row: R) => unknown;
  render?: (row: R) => ComponentChildren;
}

/** A data table with a CSV export of exactly what it shows. */
export function DataTable<R>({
  caption,
  columns,
  rows,
  file,
  testId,
}: {
  caption: string;
  columns: Column<R>[];
  rows: R[];
  file: string;
  testId?: string;
}) {
  return (
    <div class="table-wrap">
      <table data-testid={testId}>
        <caption>
          {caption}{' '}
          <button
            type="button"
            class="secondary"
            onClick={() =>
              downloadCsv(
                file,
                columns.map((c) => c.title),
                rows.map((r) => columns.map((c) => c.value(r))),
              )
            }
          >
            Export CSV<span class="visually-hidden"> of {caption}</span>
          </button>
        </caption>
        <thead>
          <tr>
            {columns.map((c) => (
              <th scope="col">{c.title}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.length === 0 ? (
            <tr>
              <td colSpan={columns.length}>Nothing to show.</td>
            </tr>
          ) : (
            rows.map((r) => (
              <tr>
                {columns.map((c) => (
                  <td>{c.render ? c.render(r) : String(c.value(r) ?? '')}</td>
                ))}
              </tr>
            ))
          )}
        </tbody>
      </table>
    </div>
  );
}

export function Notice({ kind, children }: { kind: 'error' | 'ok'; children: ComponentChildren }) {
  return (
    <p class={`notice ${kind}`} role={kind === 'error' ? 'alert' : 'status'}>
      {children}
    </p>
  );
}

export const money = (n: number | null | undefined, currency: string): string =>
  n === null || n === undefined
    ? '—'
    : new Intl.NumberFormat('en-US', { style: 'currency', currency, maximumFractionDigits: 2 }).format(n);
export const pct = (n: number | null | undefined): string =>
  n === null || n === undefined ? '—' : `${(n * 100).toFixed(1)}%`;
