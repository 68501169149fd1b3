import { useState } from 'preact/hooks';
import { api, ApiError } from '../api';
import { Notice } from '../components';

/**
 * Key and secret rotation. The portal never renders or stores a credential (issue 13): the new
 * value goes straight to the clipboard from the API's answer and is dropped; the page only says it
 * happened. Rotating the API key ends every portal session (log in again with the new key).
 */
export function Settings({ onKeyRotated }: { onKeyRotated: (message: string) => void }) {
  const [notice, setNotice] = useState<{ kind: 'ok' | 'error'; text: string } | null>(null);
  const rotate = async (what: 'api-key' | 'webhook-secret') => {
    setNotice(null);
    try {
      const r = await api<Record<string, string>>('POST', `/v1/retain/merchant/${what}/rotate`);
      const value = what === 'api-key' ? r['api_key'] : r['webhook_secret'];
      let copied = false;
      try {
        await navigator.clipboard.writeText(value ?? '');
        copied = true;
      } catch {
        copied = false;
      }
      const name = what === 'api-key' ? 'API key' : 'webhook secret';
      const text = copied
        ? `New ${name} issued and copied to your clipboard (it is not shown here). Store it now.`
        : `New ${name} issued, but the clipboard was not available: rotate again from a browser that allows it, or use the API.`;
      if (what === 'api-key' && copied) return onKeyRotated(`${text} Log in with the new key.`);
      setNotice({ kind: copied ? 'ok' : 'error', text });
    } catch (err) {
      setNotice({
        kind: 'error',
        text: err instanceof ApiError ? `${err.code}: ${err.message}` : (err as Error).message,
      });
    }
  };
  return (
    <main id="main">
      <h1>Settings</h1>
      <section aria-labelledby="keys">
        <h2 id="keys">Credentials</h2>
        <p>
          A rotation takes effect at once: the old webhook secret stops signing pushes; the old API key stops working
          and every portal session ends.
        </p>
        <button type="button" onClick={() => void rotate('webhook-secret')}>
          Rotate webhook secret
        </button>{' '}
        <button type="button" class="danger" onClick={() => void rotate('api-key')}>
          Rotate API key
        </button>
      </section>
      {notice ? <Notice kind={notice.kind}>{notice.text}</Notice> : null}
    </main>
  );
}
