import { useEffect, useRef, useState } from 'preact/hooks';
import { api, ApiError } from '../api';
import { NewCredential, Notice } from '../components';

/**
 * Key and secret rotation. A rotation commits before the page sees the new value, so the page must
 * hand it over whatever the clipboard does: it is shown once in a read-only field with a Copy button
 * (NewCredential), never stored. A new API key is shown by the App (`onApiKeyIssued`): rotating it
 * ends every portal session, this one too, and the merchant logs in again with it.
 */
export function Settings({ onApiKeyIssued }: { onApiKeyIssued: (apiKey: string) => void }) {
  const [notice, setNotice] = useState<{ kind: 'ok' | 'error'; text: string } | null>(null);
  const [secret, setSecret] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  // Rotating the API key breaks every integration still using the current one, at once: asked first.
  const [confirmKey, setConfirmKey] = useState(false);
  const yes = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (confirmKey) yes.current?.focus();
  }, [confirmKey]);
  const rotate = async (what: 'api-key' | 'webhook-secret') => {
    if (busy) return;
    setConfirmKey(false);
    setBusy(true);
    setNotice(null);
    setSecret(null);
    try {
      const r = await api<Record<string, string>>('POST', `/v1/retain/merchant/${what}/rotate`);
      const value = what === 'api-key' ? r['api_key'] : r['webhook_secret'];
      if (!value) throw new Error('The answer carried no new value: rotate again.');
      if (what === 'api-key') onApiKeyIssued(value);
      else setSecret(value);
    } catch (err) {
      setNotice({
        kind: 'error',
        text: err instanceof ApiError ? `${err.code}: ${err.message}` : (err as Error).message,
      });
    } finally {
      setBusy(false);
    }
  };
  return (
    <main id="main">
      <h1>Settings</h1>
      <section aria-labelledby="keys">
        <h2 id="keys">Credentials</h2>
        <p>
          A rotation takes effect at once: the old webhook secret stops signing pushes; the old API key stops working
          and every portal session ends. The new one is shown once, here.
        </p>
        <button type="button" disabled={busy} onClick={() => void rotate('webhook-secret')}>
          Rotate webhook secret
        </button>{' '}
        <button
          type="button"
          class="danger"
          disabled={busy}
          onClick={() => {
            setNotice(null);
            setConfirmKey(true);
          }}
        >
          Rotate API key
        </button>
        {confirmKey ? (
          <div class="confirm" role="group" aria-label="Confirm API key rotation">
            <p>
              Rotate the API key? The current key stops working at once, for every integration that uses it, and every
              portal session ends, this one too.
            </p>
            <div class="actions">
              <button type="button" class="danger" ref={yes} disabled={busy} onClick={() => void rotate('api-key')}>
                Yes, rotate the API key
              </button>
              <button type="button" class="secondary" onClick={() => setConfirmKey(false)}>
                Cancel
              </button>
            </div>
          </div>
        ) : null}
      </section>
      {secret ? (
        <NewCredential
          name="webhook secret"
          value={secret}
          note="Pushes are signed with it from now on."
          doneLabel="I have stored the secret"
          onDone={() => {
            setSecret(null);
            setNotice({ kind: 'ok', text: 'Webhook secret rotated.' });
          }}
        />
      ) : null}
      {notice ? <Notice kind={notice.kind}>{notice.text}</Notice> : null}
    </main>
  );
}
