import DataLoader from 'dataloader';

/**
 * Group commit for small hot-path statements: concurrent calls are gathered into one batch and
 * run as one statement. While a batch is in flight the next one fills up and runs as soon as it
 * ends; when idle a call runs on the next turn of the event loop, so nothing waits on a timer.
 * On these machines a statement over loopback TCP costs far more than a row in a batch (see
 * bench/webhooks), so batching is what lets 64 concurrent jobs share a few connections.
 *
 * `run` must return one result per key, in the keys' order (DataLoader's contract); a failure of
 * the statement rejects every call of its batch, and each caller handles it as before.
 */
export function groupCommit<K, V>(
  run: (keys: readonly K[]) => Promise<readonly V[]>,
  maxBatchSize = 256,
): (key: K) => Promise<V> {
  let inflight: Promise<unknown> = Promise.resolve();
  const loader = new DataLoader<K, V>(
    (keys) => {
      const batch = run(keys);
      inflight = batch.catch(() => undefined);
      return batch;
    },
    {
      cache: false,
      maxBatchSize,
      batchScheduleFn: (dispatch) => void inflight.then(() => setImmediate(dispatch)),
    },
  );
  return (key) => loader.load(key);
}
