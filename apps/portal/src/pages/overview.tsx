import { useEffect, useState } from 'preact/hooks';
import { api, day, type Analytics } from '../api';
import { ChartBox, DataTable, Notice, PALETTE, money, pct } from '../components';

/** Recovery at a glance: the analytics API's figures, charts and tables (same numbers). */
export function Overview() {
  const today = new Date();
  const [from, setFrom] = useState(day(new Date(today.getTime() - 29 * 86_400_000)));
  const [to, setTo] = useState(day(today));
  const [data, setData] = useState<Analytics | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    // The figures of another range never stay on screen under this one, nor come back late over it
    // (typing a date asks for each digit's range: an earlier one may answer last).
    let current = true;
    setError(null);
    setData(null);
    api<Analytics>('GET', `/v1/retain/analytics?from=${from}&to=${to}&bucket=day`)
      .then((d) => current && setData(d))
      .catch((e: Error) => current && setError(e.message));
    return () => {
      current = false;
    };
  }, [from, to]);
  return (
    <main id="main">
      <h1>Overview</h1>
      <form class="range" onSubmit={(e) => e.preventDefault()}>
        <label for="from">From</label>
        <input id="from" type="date" value={from} onChange={(e) => setFrom((e.target as HTMLInputElement).value)} />
        <label for="to">To</label>
        <input id="to" type="date" value={to} onChange={(e) => setTo((e.target as HTMLInputElement).value)} />
      </form>
      {error ? <Notice kind="error">{error}</Notice> : null}
      {!data && !error ? <p>Loading…</p> : null}
      {data && data.currencies.length === 0 ? <p>No failed transactions submitted in this range.</p> : null}
      {data?.currencies.map((c) => {
        const t = c.totals;
        const decline = (c.breakdowns['decline_code'] ?? []).slice(0, 8);
        return (
          <section aria-labelledby={`cur-${c.currency}`} data-currency={c.currency}>
            <h2 id={`cur-${c.currency}`}>{c.currency}</h2>
            <dl class="figures">
              <div>
                <dt>Failed amount</dt>
                <dd data-testid={`failed_amount-${c.currency}`}>{money(t.failed_amount, c.currency)}</dd>
              </div>
              <div>
                <dt>Recovered amount</dt>
                <dd data-testid={`recovered_amount-${c.currency}`}>{money(t.recovered_amount, c.currency)}</dd>
              </div>
              <div>
                <dt>Recovered</dt>
                <dd data-testid={`recovered_count-${c.currency}`}>{t.recovered_count}</dd>
              </div>
              <div>
                <dt>Recovery rate</dt>
                <dd data-testid={`recovery_rate-${c.currency}`}>{pct(t.recovery_rate)}</dd>
              </div>
              <div>
                <dt>Attempts per recovery</dt>
                <dd data-testid={`attempts_per_recovery-${c.currency}`}>{t.attempts_per_recovery ?? '—'}</dd>
              </div>
              <div>
                <dt>Network fees avoided (USD)</dt>
                <dd data-testid={`network_fees_avoided-${c.currency}`}>{money(c.network_fees_avoided, 'USD')}</dd>
              </div>
            </dl>
            <div class="charts">
              <ChartBox
                title={`Recovered revenue per day (${c.currency})`}
                config={{
                  type: 'bar',
                  data: {
                    labels: c.series.map((s) => s.period_start),
                    datasets: [
                      {
                        label: 'Recovered',
                        data: c.series.map((s) => s.recovered_amount),
                        backgroundColor: PALETTE[0],
                      },
                      { label: 'Failed', data: c.series.map((s) => s.failed_amount), backgroundColor: PALETTE[1] },
                    ],
                  },
                }}
              />
              <ChartBox
                title="Recovery funnel"
                config={{
                  type: 'bar',
                  data: {
                    labels: ['Failed', 'Attempts', 'Recovered', 'Refunded'],
                    datasets: [
                      {
                        label: 'Count',
                        data: [t.failed_count, t.attempts, t.recovered_count, t.refunded_count],
                        backgroundColor: PALETTE[2],
                      },
                    ],
                  },
                }}
              />
              <ChartBox
                title="Success by attempt number"
                config={{
                  type: 'bar',
                  data: {
                    labels: c.success_by_attempt.map((a) => `#${a.attempt_number}`),
                    datasets: [
                      {
                        label: 'Recovered',
                        data: c.success_by_attempt.map((a) => a.recovered),
                        backgroundColor: PALETTE[0],
                      },
                      {
                        label: 'Attempts',
                        data: c.success_by_attempt.map((a) => a.attempts),
                        backgroundColor: PALETTE[5],
                      },
                    ],
                  },
                }}
              />
              <ChartBox
                title="Decline mix (failed transactions by code)"
                config={{
                  type: 'doughnut',
                  data: {
                    labels: decline.map((d) => d.key),
                    datasets: [{ data: decline.map((d) => d.failed_count), backgroundColor: PALETTE }],
                  },
                }}
              />
            </div>
            <DataTable
              caption={`Days with activity (${c.currency})`}
              file={`retain-per-day-${c.currency}.csv`}
              rows={c.series.filter((s) => s.failed_count > 0 || s.recovered_count > 0 || s.attempts > 0)}
              columns={[
                { title: 'Day', value: (s) => s.period_start },
                { title: 'Failed', value: (s) => s.failed_count },
                // Shown as money like the figures above; the CSV keeps the API's numbers.
                {
                  title: 'Failed amount',
                  value: (s) => s.failed_amount,
                  render: (s) => money(s.failed_amount, c.currency),
                },
                { title: 'Recovered', value: (s) => s.recovered_count },
                {
                  title: 'Recovered amount',
                  value: (s) => s.recovered_amount,
                  render: (s) => money(s.recovered_amount, c.currency),
                },
                { title: 'Attempts', value: (s) => s.attempts },
              ]}
            />
            <DataTable
              caption={`Success by attempt number (${c.currency})`}
              file={`retain-by-attempt-${c.currency}.csv`}
              rows={c.success_by_attempt}
              columns={[
                { title: 'Attempt', value: (a) => a.attempt_number },
                { title: 'Attempts', value: (a) => a.attempts },
                { title: 'Recovered', value: (a) => a.recovered },
                { title: 'Success rate', value: (a) => a.success_rate, render: (a) => pct(a.success_rate) },
              ]}
            />
            <DataTable
              caption={`Decline codes (${c.currency})`}
              file={`retain-decline-codes-${c.currency}.csv`}
              rows={c.breakdowns['decline_code'] ?? []}
              columns={[
                { title: 'Code', value: (d) => d.key },
                { title: 'Failed', value: (d) => d.failed_count },
                { title: 'Recovered', value: (d) => d.recovered_count },
                { title: 'Recovery rate', value: (d) => d.recovery_rate, render: (d) => pct(d.recovery_rate) },
              ]}
            />
          </section>
        );
      })}
    </main>
  );
}
