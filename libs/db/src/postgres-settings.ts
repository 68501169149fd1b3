import type { DataSource } from 'typeorm';

/** What the service needs of its Postgres server (README "Postgres settings"), as read from it. */
export interface PostgresSettingsReport {
  autovacuum: string;
  trackCounts: string;
  sharedBuffersBytes: number;
  maxConnections: number;
  warnings: string[];
}

/**
 * The pools of the prod overlay's minimum replicas: intake-api 3 x 20 (k8s/base's HPA minimum is 2: 90
 * in all), webhook-dispatcher 20 and 10 for each of the other three apps (PlatformModule), 110, plus room
 * for the migration Job, the CLI, KEDA's backlog query and an operator. At the autoscalers' maxima they
 * hold 620: see README "Postgres settings".
 */
export const MIN_CONNECTIONS = 130;

/** Below this the working set of a million transactions (indexes of the hot lists) does not stay cached. */
export const MIN_SHARED_BUFFERS_BYTES = 256 * 1024 * 1024;

/**
 * Reads the settings the plans depend on: autovacuum (and track_counts, which it needs) keeps the
 * statistics fresh and dead rows of the retention deletes reclaimed; shared_buffers keeps the
 * list indexes in memory. The migration Job logs each warning; nothing is changed.
 */
export async function checkPostgresSettings(db: Pick<DataSource, 'query'>): Promise<PostgresSettingsReport> {
  const [row]: { autovacuum: string; track_counts: string; shared_buffers_bytes: string; max_connections: number }[] =
    await db.query(
      `SELECT current_setting('autovacuum') AS autovacuum, current_setting('track_counts') AS track_counts,
            (SELECT setting::bigint * pg_size_bytes(unit) FROM pg_settings WHERE name = 'shared_buffers')::text
              AS shared_buffers_bytes, current_setting('max_connections')::int AS max_connections`,
    );
  const report: PostgresSettingsReport = {
    autovacuum: row!.autovacuum,
    trackCounts: row!.track_counts,
    sharedBuffersBytes: Number(row!.shared_buffers_bytes),
    maxConnections: Number(row!.max_connections),
    warnings: [],
  };
  if (report.autovacuum !== 'on')
    report.warnings.push('autovacuum is off: statistics go stale and list plans degrade; turn it on');
  if (report.trackCounts !== 'on')
    report.warnings.push('track_counts is off: autovacuum cannot know what to analyze; turn it on');
  if (report.sharedBuffersBytes < MIN_SHARED_BUFFERS_BYTES)
    report.warnings.push(
      `shared_buffers is ${Math.round(report.sharedBuffersBytes / 1048576)} MB: give it at least 256 MB (about 25% of the server's memory)`,
    );
  if (report.maxConnections < MIN_CONNECTIONS)
    report.warnings.push(
      `max_connections is ${report.maxConnections}: the apps' pools at k8s/base's minimum replicas need ${MIN_CONNECTIONS} (620 at the autoscalers' maxima); raise it or put PgBouncer (transaction pooling) in front`,
    );
  return report;
}
