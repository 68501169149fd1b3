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
import { useEffect, useRef, useState } from 'preact/hooks';
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

/** Previous page / Next page of a list read a page at a time (the API's cursors). */
export function Pager(props: {
  of: string;
  previous: boolean;
  next: boolean;
  onPrevious: () => void;
  onNext: () => void;
}) {
  return (
    <div class="pager" role="group" aria-label={`Pages of ${props.of}`}>
      <button type="button" class="secondary" disabled={!props.previous} onClick={props.onPrevious}>
        Previous page
      </button>
      <button type="button" class="secondary" disabled={!props.next} onClick={props.onNext}>
        Next page
      </button>
    </div>
  );
}

/** A data table with a CSV export of exactly what it shows; "Loading…" until its rows have come. */
export function DataTable<R>({
  caption,
  columns,
  rows,
  file,
  testId,
  loading = false,
}: {
  caption: string;
  columns: Column<R>[];
  rows: R[];
  file: string;
  testId?: string;
  loading?: boolean;
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
              <td colSpan={columns.length}>{loading ? 'Loading…' : 'Nothing to show.'}</td>
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

/**
 * A credential the API has just issued (a rotation: committed, the old one revoked), shown once in
 * a read-only field with a Copy button, so it always reaches the merchant: the clipboard is optional
 * (absent on a plain-http origin, refused by Safari after an awaited fetch). It lives in this
 * component's state only: never in the address, storage or the console; gone once `onDone`. Leaving
 * the page while it is shown asks first.
 */
export function NewCredential({
  name,
  value,
  note,
  doneLabel,
  onDone,
}: {
  name: string;
  value: string;
  note?: string;
  doneLabel: string;
  onDone: () => void;
}) {
  const field = useRef<HTMLInputElement>(null);
  const [copied, setCopied] = useState<{ kind: 'ok' | 'error'; text: string } | null>(null);
  const select = () => {
    field.current?.focus();
    field.current?.select();
  };
  useEffect(() => {
    setCopied(null);
    select();
  }, [value]);
  useEffect(() => {
    const stay = (e: BeforeUnloadEvent) => {
      e.preventDefault();
      e.returnValue = '';
    };
    addEventListener('beforeunload', stay);
    return () => removeEventListener('beforeunload', stay);
  }, []);
  const copy = async () => {
    try {
      if (!navigator.clipboard?.writeText) throw new Error('no clipboard');
      await navigator.clipboard.writeText(value);
      setCopied({ kind: 'ok', text: `The ${name} was copied to your clipboard.` });
    } catch {
      select();
      setCopied({
        kind: 'error',
        text: `This browser did not let the page copy it: the ${name} is selected in the field, copy it with Ctrl+C (⌘C on a Mac).`,
      });
    }
  };
  return (
    <section class="new-credential">
      <p class="notice warn">
        <strong>Store this {name} now: it will not be shown again.</strong> {note ?? ''}
      </p>
      <label for="new-credential">New {name}</label>
      <input
        id="new-credential"
        ref={field}
        class="secret"
        type="text"
        readOnly
        value={value}
        autocomplete="off"
        autocapitalize="off"
        spellcheck={false}
        onFocus={select}
      />
      <div class="actions">
        <button type="button" onClick={() => void copy()}>
          Copy
        </button>
        <button type="button" class="secondary" onClick={onDone}>
          {doneLabel}
        </button>
      </div>
      {copied ? <Notice kind={copied.kind}>{copied.text}</Notice> : null}
    </section>
  );
}

export { money } from './amount';
export const pct = (n: number | null | undefined): string =>
  n === null || n === undefined ? '—' : `${(n * 100).toFixed(1)}%`;
