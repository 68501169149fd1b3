import { useEffect, useRef, useState } from 'preact/hooks';
import { api, ApiError } from '../api';
import { DataTable, Notice, Pager } from '../components';

type Msg = Record<string, any>;

/**
 * The push delivery log with replay of dead pushes, the webhook URL and a test push. The log is read
 * 100 pushes a page, newest first: Next page follows the API's cursor (`starting_after`, forward only),
 * Previous page goes back to the cursor of the page before, a filter starts from the first page.
 */
export function Pushes() {
  const [status, setStatus] = useState('');
  // The `starting_after` of each page opened after the first: the last is the page shown.
  const [cursors, setCursors] = useState<string[]>([]);
  const [rows, setRows] = useState<Msg[]>([]);
  const [more, setMore] = useState(false);
  const [loading, setLoading] = useState(true);
  const [url, setUrl] = useState('');
  // The stored URL as read: Save only once it is (an empty field after a failed read would remove it).
  const [urlRead, setUrlRead] = useState(false);
  const [notice, setNotice] = useState<{ kind: 'ok' | 'error'; text: string } | null>(null);
  // The log's latest request: an earlier filter's or page's answer that comes last is not shown.
  const latest = useRef(0);
  const load = () => {
    const query = new URLSearchParams({ limit: '100' });
    if (status) query.set('status', status);
    const after = cursors[cursors.length - 1];
    if (after) query.set('starting_after', after);
    const mine = ++latest.current;
    return api<{ data: Msg[]; next: string | null }>('GET', `/v1/retain/webhook-messages?${query}`)
      .then((r) => {
        if (mine !== latest.current) return;
        setRows(r.data);
        setMore(r.next !== null);
      })
      .catch((e: Error) => mine === latest.current && setNotice({ kind: 'error', text: e.message }))
      .finally(() => mine === latest.current && setLoading(false));
  };
  useEffect(() => {
    setRows([]);
    setMore(false);
    setLoading(true);
    setNotice(null);
    void load();
  }, [status, cursors]);
  useEffect(() => {
    api<{ url: string | null }>('GET', '/v1/retain/merchant/webhook')
      .then((r) => {
        setUrl(r.url ?? '');
        setUrlRead(true);
      })
      .catch((e: Error) =>
        setNotice({
          kind: 'error',
          text: `The webhook URL could not be read (${e.message}): reload the page before saving it.`,
        }),
      );
  }, []);
  // One action at a time (Save, Send test push, Replay): its buttons wait for the answer, and the ref
  // stops a second click before the page has re-rendered (a double click sent two test pushes).
  const [busy, setBusy] = useState(false);
  const acting = useRef(false);
  const act = async (what: () => Promise<string>) => {
    if (acting.current) return;
    acting.current = true;
    setBusy(true);
    setNotice(null);
    try {
      setNotice({ kind: 'ok', text: await what() });
      await load();
    } catch (err) {
      setNotice({
        kind: 'error',
        text: err instanceof ApiError ? `${err.code}: ${err.message}` : (err as Error).message,
      });
    } finally {
      acting.current = false;
      setBusy(false);
    }
  };
  return (
    <main id="main">
      <h1>Pushes</h1>
      <form
        class="webhook"
        onSubmit={(e) => {
          e.preventDefault();
          void act(async () => {
            const r = await api<{ url: string | null }>('PUT', '/v1/retain/merchant/webhook', { url: url || null });
            return `Webhook URL saved: ${r.url ?? '(none)'}`;
          });
        }}
      >
        <label for="webhook-url">Webhook URL</label>
        <input id="webhook-url" type="url" value={url} onInput={(e) => setUrl((e.target as HTMLInputElement).value)} />
        <button type="submit" disabled={!urlRead || busy}>
          Save
        </button>
        <button
          type="button"
          class="secondary"
          disabled={busy}
          onClick={() =>
            void act(async () => {
              const r = await api<{ message_id: string }>('POST', '/v1/retain/merchant/webhook/test');
              return `Test push sent: ${r.message_id}`;
            })
          }
        >
          Send test push
        </button>
      </form>
      {notice ? <Notice kind={notice.kind}>{notice.text}</Notice> : null}
      <label for="push-status">Status</label>{' '}
      <select
        id="push-status"
        value={status}
        onChange={(e) => {
          setStatus((e.target as HTMLSelectElement).value);
          setCursors([]);
        }}
      >
        <option value="">Any</option>
        {['pending', 'delivered', 'dead', 'gone', 'no_endpoint'].map((s) => (
          <option value={s}>{s}</option>
        ))}
      </select>
      <DataTable
        caption="Push delivery log"
        file="retain-pushes.csv"
        testId="pushes"
        rows={rows}
        loading={loading}
        columns={[
          { title: 'Message', value: (m) => m['message_id'] },
          { title: 'Event', value: (m) => m['event_name'] },
          { title: 'Transaction', value: (m) => m['transaction_id'] ?? '' },
          { title: 'Status', value: (m) => m['status'] },
          { title: 'Attempts', value: (m) => m['attempt_count'] },
          { title: 'Last error', value: (m) => m['last_error'] ?? '' },
          {
            title: 'Action',
            value: () => '',
            render: (m) =>
              m['status'] === 'dead' || m['status'] === 'gone' ? (
                <button
                  type="button"
                  disabled={busy}
                  onClick={() =>
                    void act(async () => {
                      await api('POST', `/v1/retain/webhook-messages/${m['message_id']}/replay`);
                      return `Replaying ${m['message_id']}`;
                    })
                  }
                >
                  Replay<span class="visually-hidden"> {m['message_id']}</span>
                </button>
              ) : null,
          },
        ]}
      />
      <Pager
        of="pushes"
        previous={cursors.length > 0}
        next={more && rows.length > 0}
        onPrevious={() => setCursors(cursors.slice(0, -1))}
        onNext={() => setCursors([...cursors, String(rows[rows.length - 1]!['message_id'])])}
      />
    </main>
  );
}
