import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, onSessionEnded } from './api';
import { NewCredential, Notice } from './components';
import { Login } from './pages/login';
import { Overview } from './pages/overview';
import { Pushes } from './pages/pushes';
import { Settings } from './pages/settings';
import { TransactionDetail, TransactionNotFound, Transactions } from './pages/transactions';
import './styles.css';

const route = (): string => location.hash.replace(/^#/, '') || '/overview';

/** A %-escaped address segment, or null when it is malformed (`%`, `%zz`, a cut UTF-8 sequence). */
const decoded = (segment: string): string | null => {
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
};

/** The skip link: the focus goes to the page's <main> (focusable by script only), the route stays. */
const skipToContent = (e: Event): void => {
  e.preventDefault();
  const main = document.getElementById('main');
  if (!main) return;
  main.tabIndex = -1;
  main.focus();
};

function App() {
  const [who, setWho] = useState<string | null | undefined>(undefined);
  const [path, setPath] = useState(route());
  const [message, setMessage] = useState<string | undefined>(undefined);
  // A rotated API key, until the merchant says it is stored: the session has already ended.
  const [newApiKey, setNewApiKey] = useState<string | null>(null);
  const [logoutError, setLogoutError] = useState<string | null>(null);
  const check = () =>
    api<{ login: string }>('GET', '/v1/retain/session')
      .then((r) => setWho(r.login))
      .catch(() => setWho(null));
  useEffect(() => {
    // Any 401 of a page's request: the session expired or was ended elsewhere (another tab's logout,
    // a key rotation). Back to the login form, which says so; the address stays, so logging in again
    // returns to the same page.
    onSessionEnded(() => {
      setMessage('Your session has ended. Log in again.');
      setWho(null);
    });
    void check();
    const onHash = () => {
      setPath(route());
      setLogoutError(null);
    };
    addEventListener('hashchange', onHash);
    return () => removeEventListener('hashchange', onHash);
  }, []);
  useEffect(() => {
    document.title = `Retain portal — ${path.split('/')[1] ?? ''}`;
  }, [path]);
  if (newApiKey)
    return (
      <main id="main">
        <h1>Your new API key</h1>
        <NewCredential
          name="API key"
          value={newApiKey}
          note="The old key no longer works and every portal session has ended, this one too: log in again with this key."
          doneLabel="I have stored the key: log in"
          onDone={() => {
            setNewApiKey(null);
            setMessage('API key rotated. Log in with the new key.');
            setWho(null);
          }}
        />
      </main>
    );
  if (who === undefined) return <p>Loading…</p>;
  if (who === null)
    return (
      <Login
        message={message}
        onLoggedIn={() => {
          setMessage(undefined);
          setLogoutError(null);
          void check();
        }}
      />
    );
  // Logged out only once the server says the session has ended: on no answer or a failure it may
  // still be live (a reload would be logged in), so the portal stays and says so.
  const logout = async () => {
    setLogoutError(null);
    try {
      await api('DELETE', '/v1/retain/session');
    } catch (err) {
      setLogoutError(`You are not logged out: the session may still be live (${(err as Error).message}). Try again.`);
      return;
    }
    setMessage('You are logged out.');
    setWho(null);
  };
  const txn = /^\/transactions\/(.+)$/.exec(path);
  const txnId = txn ? decoded(txn[1]!) : null;
  const page = txn ? (
    txnId === null ? (
      <TransactionNotFound id={txn[1]!} />
    ) : (
      <TransactionDetail id={txnId} />
    )
  ) : path === '/transactions' ? (
    <Transactions open={(id) => (location.hash = `#/transactions/${encodeURIComponent(id)}`)} />
  ) : path === '/pushes' ? (
    <Pushes />
  ) : path === '/settings' ? (
    <Settings onApiKeyIssued={setNewApiKey} />
  ) : (
    <Overview />
  );
  const link = (href: string, label: string) => (
    <a href={`#${href}`} aria-current={path.startsWith(href) ? 'page' : undefined}>
      {label}
    </a>
  );
  return (
    <>
      {/* The address's #fragment is the route: following href="#main" would open a page named "main"
          (the overview). The link moves the focus to the page's content instead. */}
      <a class="skip" href="#main" onClick={skipToContent}>
        Skip to content
      </a>
      <header>
        <nav aria-label="Portal">
          <span class="brand">Retain</span>
          {link('/overview', 'Overview')}
          {link('/transactions', 'Transactions')}
          {link('/pushes', 'Pushes')}
          {link('/settings', 'Settings')}
          <span class="who">{who}</span>
          <button type="button" class="secondary" onClick={() => void logout()}>
            Log out
          </button>
        </nav>
      </header>
      {logoutError ? (
        <div class="banner">
          <Notice kind="error">{logoutError}</Notice>
        </div>
      ) : null}
      {page}
    </>
  );
}

render(<App />, document.getElementById('app')!);
