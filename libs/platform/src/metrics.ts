import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * The service's Prometheus metrics, defined once. Labels never carry card data, keys or secrets:
 * only app, queue, outcome, status class and route patterns.
 */
export class RetainMetrics {
  readonly registry = new Registry();
  readonly httpDuration = new Histogram({
    name: 'retain_http_request_duration_seconds',
    help: 'HTTP request duration by method, route pattern and status code',
    labelNames: ['method', 'route', 'status'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });
  readonly queueDepth = new Gauge({
    name: 'retain_queue_depth',
    help: 'Jobs per queue and state',
    labelNames: ['queue', 'state'],
    registers: [this.registry],
  });
  readonly jobDuration = new Histogram({
    name: 'retain_job_duration_seconds',
    help: 'Job handler duration by queue and result',
    labelNames: ['queue', 'result'],
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30],
    registers: [this.registry],
  });
  readonly jobFailures = new Counter({
    name: 'retain_job_failures_total',
    help: 'Job handler failures by queue',
    labelNames: ['queue'],
    registers: [this.registry],
  });
  readonly attempts = new Counter({
    name: 'retain_retry_attempts_total',
    help: 'Retry attempts by outcome (captured, declined, error)',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  readonly recoveredMinor = new Counter({
    name: 'retain_recovered_amount_minor_total',
    help: 'Recovered amount in minor units, by currency',
    labelNames: ['currency'],
    registers: [this.registry],
  });
  readonly webhookDeliveries = new Counter({
    name: 'retain_webhook_deliveries_total',
    help: 'Webhook delivery attempts by result (2xx, 4xx, 5xx, 410, error, refused)',
    labelNames: ['result'],
    registers: [this.registry],
  });
  readonly webhookLatency = new Histogram({
    name: 'retain_webhook_delivery_duration_seconds',
    help: 'Webhook delivery latency',
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly submissions = new Counter({
    name: 'retain_submitted_transactions_total',
    help: 'Submitted transactions by result (accepted, rejected)',
    labelNames: ['result'],
    registers: [this.registry],
  });

  constructor(app: string) {
    this.registry.setDefaultLabels({ app });
    collectDefaultMetrics({ register: this.registry });
  }
}
