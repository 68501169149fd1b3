import { useState } from 'preact/hooks';
import { api, ApiError } from '../api';
import { Notice } from '../components';

/** decisions §14: login + API key for an HttpOnly session cookie. The key is sent once, never kept. */
export function Login({ onLoggedIn, message }: { onLoggedIn: () => void; message?: string }) {
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const data = new FormData(form);
    setBusy(true);
    setError(null);
    try {
      await api('POST', '/v1/retain/session', { login: data.get('login'), api_key: data.get('api_key') });
      form.reset();
      onLoggedIn();
    } catch (err) {
      setError(err instanceof ApiError && err.status === 401 ? 'Wrong login or API key.' : (err as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="login" id="main">
      <h1>Retain portal</h1>
      {message ? <Notice kind="ok">{message}</Notice> : null}
      <form onSubmit={submit} autocomplete="off">
        <label for="login">Login</label>
        <input id="login" name="login" required autocomplete="username" />
        <label for="api_key">API key</label>
        <input id="api_key" name="api_key" type="password" required autocomplete="off" />
        <button type="submit" disabled={busy}>
          Log in
        </button>
      </form>
      {error ? <Notice kind="error">{error}</Notice> : null}
    </main>
  );
}
