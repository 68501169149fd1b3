import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { api, ApiError } from '../api';
import { NewCredential, Notice } from '../components';

/**
 * Key and secret rotation. A rotation commits before the page sees the new value, so the page must
 * hand it over whatever the clipboard does: it is shown once in a read-only field with a Copy button
 * (NewCredential), never stored. A new API key is shown by the App (`onApiKeyIssued`): rotating it
 * ends every portal session, this one too, and the merchant logs in again with it.
 */
type Credential = 'api-key' | 'webhook-secret';

/** What each rotation's question says breaks at once. */
const QUESTIONS: Record<Credential, { name: string; text: string }> = {
  'api-key': {
    name: 'API key',
    text:
      'Rotate the API key? The current key stops working at once, for every integration that uses it, and every ' +
      'portal session ends, this one too.',
  },
  'webhook-secret': {
    name: 'webhook secret',
    text:
      'Rotate the webhook secret? The next push is signed with the new secret only: your endpoint rejects pushes ' +
      'until it has the new secret.',
  },
};

export function Settings({ onApiKeyIssued }: { onApiKeyIssued: (apiKey: string) => void }) {
  const [notice, setNotice] = useState<{ kind: 'ok' | 'error'; text: string } | null>(null);
  const [secret, setSecret] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  // Either rotation breaks something at once (every integration still using the API key; the
  // merchant's verification of pushes until its endpoint has the new secret): asked first.
  const [confirming, setConfirming] = useState<Credential | null>(null);
  const yes = useRef<HTMLButtonElement>(null);
  // Focused as the question is shown (a layout effect runs before the frame is painted): a key pressed
  // at once goes to the answer, not to the button that asked.
  useLayoutEffect(() => {
    if (confirming) yes.current?.focus();
  }, [confirming]);
  const rotate = async (what: Credential) => {
    if (busy) return;
    setConfirming(null);
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
  const ask = (what: Credential) => {
    setNotice(null);
    setConfirming(what);
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
        <button type="button" disabled={busy} onClick={() => ask('webhook-secret')}>
          Rotate webhook secret
        </button>{' '}
        <button type="button" class="danger" disabled={busy} onClick={() => ask('api-key')}>
          Rotate API key
        </button>
        {confirming ? (
          <div class="confirm" role="group" aria-label={`Confirm ${QUESTIONS[confirming].name} rotation`}>
            <p>{QUESTIONS[confirming].text}</p>
            <div class="actions">
              <button type="button" class="danger" ref={yes} disabled={busy} onClick={() => void rotate(confirming)}>
                Yes, rotate the {QUESTIONS[confirming].name}
              </button>
              <button type="button" class="secondary" onClick={() => setConfirming(null)}>
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
