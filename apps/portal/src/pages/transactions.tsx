import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { TRANSACTION_STATUSES } from '../../../../libs/domain/src/statuses';
import { readRefundAmount } from '../amount';
import { api, ApiError, newIdempotencyKey } from '../api';
import { DataTable, Notice, Pager, money } from '../components';

type Txn = Record<string, any>;

const PAGE_SIZE = 50;

/** Where a page of the list starts: the first page, or after / before a transaction (the API's cursors). */
type Cursor = { after: string } | { before: string } | null;

/**
 * Search and list the merchant's transactions (the list API, newest first; card numbers come masked),
 * a page at a time: Next / Previous page follow the API's cursors, a filter starts from its first page.
 */
export function Transactions({ open }: { open: (id: string) => void }) {
  const [status, setStatus] = useState('');
  const [cursor, setCursor] = useState<Cursor>(null);
  const [page, setPage] = useState<{ rows: Txn[]; next: boolean; previous: boolean; loading: boolean }>({
    rows: [],
    next: false,
    previous: false,
    loading: true,
  });
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    // Nothing of the list before (its rows, its error) stays under this one.
    setPage({ rows: [], next: false, previous: false, loading: true });
    setError(null);
    let current = true;
    const query = new URLSearchParams({ limit: String(PAGE_SIZE) });
    if (status) query.set('status', status);
    if (cursor && 'after' in cursor) query.set('starting_after', cursor.after);
    if (cursor && 'before' in cursor) query.set('ending_before', cursor.before);
    api<{ data: Txn[]; next: string | null; previous: string | null }>('GET', `/v1/retain/transactions?${query}`)
      .then(
        (r) =>
          current && setPage({ rows: r.data, next: r.next !== null, previous: r.previous !== null, loading: false }),
      )
      .catch((e: Error) => {
        if (!current) return;
        setPage({ rows: [], next: false, previous: false, loading: false });
        setError(e.message);
      });
    return () => {
      current = false;
    };
  }, [status, cursor]);
  const rows = page.rows;
  const search = (e: Event) => {
    e.preventDefault();
    const id = String(new FormData(e.currentTarget as HTMLFormElement).get('id') ?? '').trim();
    if (id) open(id);
  };
  return (
    <main id="main">
      <h1>Transactions</h1>
      <form class="search" onSubmit={search} role="search">
        <label for="txn-id">Transaction id</label>
        <input id="txn-id" name="id" required />
        <button type="submit">Open</button>
        <label for="status">Status</label>
        <select
          id="status"
          value={status}
          onChange={(e) => {
            setStatus((e.target as HTMLSelectElement).value);
            setCursor(null);
          }}
        >
          <option value="">Any</option>
          {TRANSACTION_STATUSES.map((s) => (
            <option value={s}>{s}</option>
          ))}
        </select>
      </form>
      {error ? <Notice kind="error">{error}</Notice> : null}
      <DataTable
        caption="Latest transactions"
        file="retain-transactions.csv"
        testId="transactions"
        rows={rows}
        loading={page.loading}
        columns={[
          {
            title: 'Id',
            value: (t) => t['id'],
            render: (t) => <a href={`#/transactions/${encodeURIComponent(t['id'])}`}>{t['id']}</a>,
          },
          { title: 'Status', value: (t) => t['status'] },
          {
            title: 'Amount',
            value: (t) => t['amount'],
            // A partial authorization (decisions §15): what was captured, beside what was asked.
            render: (t) =>
              t['partial_amount'] != null
                ? `${money(t['amount'], t['currency'])} (captured ${money(t['partial_amount'], t['currency'])})`
                : money(t['amount'], t['currency']),
          },
          { title: 'Decline', value: (t) => t['auth_code'] },
          { title: 'Card', value: (t) => t['payment_method']?.credit_card?.account ?? '' },
          { title: 'Submitted', value: (t) => t['submitted_ts'] },
        ]}
      />
      <Pager
        of="transactions"
        previous={page.previous && rows.length > 0}
        next={page.next && rows.length > 0}
        onPrevious={() => setCursor({ before: String(rows[0]!['id']) })}
        onNext={() => setCursor({ after: String(rows[rows.length - 1]!['id']) })}
      />
    </main>
  );
}

/** An address naming no readable id (a malformed %-escape, as typed or cut): nothing is asked of the API. */
export function TransactionNotFound({ id }: { id: string }) {
  return (
    <main id="main">
      <h1>Transaction not found</h1>
      <Notice kind="error">No transaction "{id}".</Notice>
      <p>
        <a href="#/transactions">Back to transactions</a>
      </p>
    </main>
  );
}

/** One transaction: its attempts as a timeline, its pushes, refund and stop. */
export function TransactionDetail({ id }: { id: string }) {
  const [rows, setRows] = useState<Txn[] | null>(null);
  // null while they load; an error is said, never shown as no pushes.
  const [pushes, setPushes] = useState<Txn[] | null>(null);
  const [pushesError, setPushesError] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [done, setDone] = useState<string | null>(null);
  const [amountError, setAmountError] = useState<string | null>(null);
  // One request at a time (the button is disabled meanwhile; the ref also stops a second submit
  // before the page has re-rendered), and one Idempotency-Key per submission: kept while the
  // answer is unknown, so pressing again after a lost answer replays it instead of refunding twice.
  const [busy, setBusy] = useState(false);
  const [confirming, setConfirming] = useState<{ amount: number | null } | null>(null);
  const yes = useRef<HTMLButtonElement>(null);
  // Focused as the question is shown (a layout effect runs before the frame is painted): a key pressed
  // at once goes to the answer, not to the button that asked.
  useLayoutEffect(() => {
    if (confirming) yes.current?.focus();
  }, [confirming]);
  const inFlight = useRef(false);
  const submission = useRef<{ body: string; key: string } | null>(null);
  // `id` is what the address names: the merchant's id or an attempt's retain_transaction_id. The
  // page shows (and refunds, and lists the pushes of) the transaction it loads: its own `id`.
  const current = useRef(id);
  const load = () => {
    const asked = id;
    api<{ data: Txn[] }>('GET', `/v1/retain/transactions/${encodeURIComponent(asked)}?related=true`)
      .then((r) => {
        if (current.current !== asked) return;
        setRows(r.data);
        const txnId = r.data[0]?.['id'];
        if (typeof txnId !== 'string') return setPushes([]);
        return api<{ data: Txn[] }>(
          'GET',
          `/v1/retain/webhook-messages?transaction_id=${encodeURIComponent(txnId)}&limit=100`,
        ).then(
          (p) => {
            if (current.current !== asked) return;
            setPushes(p.data);
            setPushesError(null);
          },
          (e: Error) => {
            if (current.current !== asked) return;
            setPushes([]);
            setPushesError(e.message);
          },
        );
      })
      .catch((e: Error) => {
        if (current.current !== asked) return;
        setError(e instanceof ApiError && e.status === 404 ? `No transaction "${asked}".` : e.message);
      });
  };
  useEffect(() => {
    // Another transaction: nothing of the one before stays on screen while it loads.
    current.current = id;
    setRows(null);
    setPushes(null);
    setPushesError(null);
    setError(null);
    setDone(null);
    setAmountError(null);
    setConfirming(null);
    submission.current = null;
    load();
  }, [id]);
  // A refund or stop cannot be undone: "Refund / stop" reads the amount and asks, naming what it will
  // do; only "Yes, refund / stop" sends it. Changing the amount or Cancel drops the question.
  const ask = (e: Event) => {
    e.preventDefault();
    if (inFlight.current) return;
    const typed = String(new FormData(e.currentTarget as HTMLFormElement).get('amount') ?? '');
    setError(null);
    setDone(null);
    const amount = readRefundAmount(typed, String(rows?.[0]?.['currency'] ?? ''));
    if (!amount.ok) {
      setConfirming(null);
      return setAmountError(amount.error);
    }
    setAmountError(null);
    setConfirming({ amount: amount.amount });
  };
  const refund = async (amount: number | null) => {
    if (inFlight.current) return;
    setError(null);
    setDone(null);
    const txnId = String(rows?.[0]?.['id'] ?? id);
    const body = { refunds: [{ id: txnId, ...(amount === null ? {} : { amount }) }] };
    // The same request again (same transaction, same amount) after no answer keeps its key.
    if (submission.current?.body !== JSON.stringify(body)) {
      submission.current = { body: JSON.stringify(body), key: newIdempotencyKey() };
    }
    inFlight.current = true;
    setBusy(true);
    try {
      const r = await api<any>('POST', '/v1/retain/refunds', body, { 'Idempotency-Key': submission.current.key });
      submission.current = null;
      const rejected = r?.rejected?.[0]?.errors?.[0];
      if (rejected) setError(`${rejected.code}: ${rejected.message}`);
      else setDone(r?.message ?? 'Refund requested.');
      load();
    } catch (err) {
      if (err instanceof ApiError && err.status < 500) {
        submission.current = null;
        setError(`${err.code}: ${err.message}`);
      } else {
        // No answer, or the service failed: the refund may or may not have been made.
        setError(
          `${err instanceof ApiError ? `Retain failed (${err.code}: ${err.message}).` : (err as Error).message} ` +
            'The refund may or may not have been made: press "Refund / stop" again with the same amount, ' +
            'it is sent as the same request and cannot refund twice.',
        );
      }
    } finally {
      inFlight.current = false;
      setBusy(false);
      setConfirming(null);
    }
  };
  if (!rows) return <main id="main">{error ? <Notice kind="error">{error}</Notice> : <p>Loading…</p>}</main>;
  const [t, ...attempts] = rows;
  return (
    <main id="main">
      <h1>Transaction {t!['id']}</h1>
      <dl class="figures">
        <div>
          <dt>Status</dt>
          <dd data-testid="status">{t!['status']}</dd>
        </div>
        <div>
          <dt>Amount</dt>
          <dd>{money(t!['amount'], t!['currency'])}</dd>
        </div>
        {t!['partial_amount'] != null ? (
          <div>
            <dt>Captured (partial authorization)</dt>
            <dd data-testid="partial-amount">{money(t!['partial_amount'], t!['currency'])}</dd>
          </div>
        ) : null}
        {t!['forced_deposit'] ? (
          <div>
            <dt>Forced deposit</dt>
            <dd>captured without authorization</dd>
          </div>
        ) : null}
        <div>
          <dt>Card</dt>
          <dd>{t!['payment_method']?.credit_card?.account ?? '—'}</dd>
        </div>
        <div>
          <dt>Original decline</dt>
          <dd>{t!['auth_code']}</dd>
        </div>
      </dl>
      <h2>Timeline</h2>
      <ol class="timeline" data-testid="timeline">
        <li>
          <strong>Failed</strong> {t!['timestamp']}: decline {t!['auth_code']}, submitted {t!['submitted_ts']}
        </li>
        {attempts.map((a) => (
          <li>
            <strong>
              Attempt {a['retry_number']}: {a['status']}
            </strong>{' '}
            {a['timestamp']} — code {a['auth_code'] ?? '—'}
            {a['partial_amount'] != null
              ? ` — captured ${money(a['partial_amount'], a['currency'])} of ${money(a['amount'], a['currency'])} (partial authorization)`
              : null}
            {a['forced_deposit'] ? ' — forced deposit (captured without authorization)' : null}
            {a['retry_plan']?.rule ? <span class="why"> (planned: {a['retry_plan'].rule})</span> : null}
          </li>
        ))}
        {t!['next_activity'] ? <li>Next attempt on {t!['next_activity']}</li> : null}
        {(t!['refunds'] ?? []).map((r: Txn) => (
          <li>
            <strong>Refund {r['status']}</strong> {money(r['amount'], t!['currency'])} {r['timestamp'] ?? ''}
          </li>
        ))}
      </ol>
      <h2>Refund or stop</h2>
      <form class="refund" onSubmit={ask}>
        <label for="amount">Amount in {t!['currency']} (empty: all that can be refunded, or stop the retries)</label>
        <input
          id="amount"
          name="amount"
          inputMode="decimal"
          autocomplete="off"
          aria-invalid={amountError ? 'true' : undefined}
          aria-describedby={amountError ? 'amount-error' : undefined}
          onInput={() => {
            setAmountError(null);
            if (!inFlight.current) setConfirming(null);
          }}
        />
        <button type="submit" disabled={busy} aria-busy={busy ? 'true' : undefined}>
          Refund / stop
        </button>
      </form>
      {confirming ? (
        <div class="confirm" role="group" aria-label="Confirm refund / stop">
          <p>
            {confirming.amount !== null
              ? `Refund ${money(confirming.amount, t!['currency'])} of transaction ${t!['id']}?`
              : `Refund all that can be refunded of transaction ${t!['id']}, or stop its retries if it is still being recovered?`}{' '}
            This cannot be undone.
          </p>
          <div class="actions">
            <button
              type="button"
              ref={yes}
              disabled={busy}
              aria-busy={busy ? 'true' : undefined}
              onClick={() => void refund(confirming.amount)}
            >
              Yes, refund / stop
            </button>
            <button type="button" class="secondary" disabled={busy} onClick={() => setConfirming(null)}>
              Cancel
            </button>
          </div>
        </div>
      ) : null}
      {amountError ? (
        <p id="amount-error" class="notice error" role="alert">
          {amountError} Nothing was sent.
        </p>
      ) : null}
      {error ? <Notice kind="error">{error}</Notice> : null}
      {done ? <Notice kind="ok">{done}</Notice> : null}
      {pushesError ? (
        <Notice kind="error">The pushes could not be read: {pushesError}</Notice>
      ) : (
        <DataTable
          caption="Pushes of this transaction"
          file={`retain-pushes-${t!['id']}.csv`}
          rows={pushes ?? []}
          loading={pushes === null}
          columns={[
            { title: 'Message', value: (p) => p['message_id'] },
            { title: 'Event', value: (p) => p['event_name'] },
            { title: 'Status', value: (p) => p['status'] },
            { title: 'Attempts', value: (p) => p['attempt_count'] },
          ]}
        />
      )}
    </main>
  );
}
