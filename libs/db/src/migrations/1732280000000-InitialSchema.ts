import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The whole schema of the service. Money is integer minor units (bigint); card numbers exist only
 * sealed with AES-256-GCM (card_enc + card_key_id) beside a keyed HMAC for lookups (decisions §10).
 */
export class InitialSchema1732280000000 implements MigrationInterface {
  name = 'InitialSchema1732280000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE EXTENSION IF NOT EXISTS pgcrypto`);
    await q.query(`
      CREATE TABLE merchants (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        merchant_vid varchar(40) NOT NULL UNIQUE,
        login varchar(128) NOT NULL UNIQUE,
        webhook_url text,
        webhook_secret_enc text,
        webhook_secret_key_id varchar(32),
        disabled_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`
      CREATE TABLE merchant_api_keys (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        merchant_id uuid NOT NULL REFERENCES merchants(id) ON DELETE CASCADE,
        key_hash char(64) NOT NULL UNIQUE,
        key_hint varchar(16) NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        revoked_at timestamptz
      )`);
    await q.query(`CREATE INDEX merchant_api_keys_merchant ON merchant_api_keys (merchant_id)`);
    await q.query(`
      CREATE TABLE submissions (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        merchant_id uuid NOT NULL REFERENCES merchants(id),
        request_id char(32) NOT NULL UNIQUE,
        received_count int NOT NULL,
        accepted_count int NOT NULL,
        rejected_count int NOT NULL,
        reviewed_at timestamptz,
        review_error_count int,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`CREATE INDEX submissions_merchant_created ON submissions (merchant_id, created_at DESC)`);
    await q.query(`
      CREATE TABLE transactions (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        vid varchar(40) NOT NULL UNIQUE,
        merchant_id uuid NOT NULL REFERENCES merchants(id),
        submission_id uuid NOT NULL REFERENCES submissions(id),
        merchant_txn_id varchar(128) NOT NULL,
        status varchar(32) NOT NULL,
        review_status varchar(16) NOT NULL DEFAULT 'pending',
        amount_minor bigint NOT NULL CHECK (amount_minor > 0),
        currency char(3) NOT NULL,
        failed_at timestamptz NOT NULL,
        submitted_ts timestamptz NOT NULL,
        status_changed_at timestamptz NOT NULL,
        division_number varchar(128) NOT NULL,
        auth_code varchar(64) NOT NULL,
        avs_code varchar(8),
        cvn_code varchar(8),
        auth_code_description varchar(16),
        payment_network_transaction_id varchar(128),
        previous_billing_count int,
        is_network_token smallint,
        cryptogram text,
        eci_indicator varchar(16),
        billing_descriptor varchar(255),
        processor_transaction_id varchar(128),
        subscription_id varchar(128) NOT NULL,
        account_id varchar(128) NOT NULL,
        account jsonb NOT NULL,
        subscription jsonb NOT NULL,
        payment_method jsonb NOT NULL,
        metadata jsonb NOT NULL DEFAULT '{}',
        card_kind varchar(8) NOT NULL,
        card_jwe text,
        card_enc text,
        card_key_id varchar(32),
        card_hmac char(64),
        card_bin varchar(8),
        card_last4 char(4),
        card_network varchar(16),
        account_hash char(40),
        expiration_date char(6),
        attempt_count int NOT NULL DEFAULT 0,
        next_attempt_at timestamptz,
        captured_amount_minor bigint,
        stop_requested_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT transactions_merchant_txn UNIQUE (merchant_id, merchant_txn_id)
      )`);
    // Reads of decisions §5: newest first with vid tie-break, and each filter scoped to the merchant.
    await q.query(`CREATE INDEX transactions_list ON transactions (merchant_id, submitted_ts DESC, vid DESC)`);
    await q.query(`CREATE INDEX transactions_status ON transactions (merchant_id, status, submitted_ts DESC)`);
    await q.query(`CREATE INDEX transactions_subscription ON transactions (merchant_id, subscription_id)`);
    await q.query(`CREATE INDEX transactions_account ON transactions (merchant_id, account_id)`);
    await q.query(`CREATE INDEX transactions_updated ON transactions (merchant_id, status_changed_at)`);
    await q.query(`CREATE INDEX transactions_submission ON transactions (submission_id)`);
    // The retry scheduler's tick: due rows only.
    await q.query(`CREATE INDEX transactions_due ON transactions (next_attempt_at) WHERE next_attempt_at IS NOT NULL`);
    await q.query(`CREATE INDEX transactions_card ON transactions (card_hmac)`);
    await q.query(`
      CREATE TABLE attempts (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        vid varchar(40) NOT NULL UNIQUE,
        retain_transaction_id varchar(40) NOT NULL UNIQUE,
        transaction_id uuid NOT NULL REFERENCES transactions(id) ON DELETE CASCADE,
        merchant_id uuid NOT NULL REFERENCES merchants(id),
        retry_number int NOT NULL,
        state varchar(16) NOT NULL,
        status varchar(32),
        scheduled_for timestamptz NOT NULL,
        amount_minor bigint NOT NULL,
        currency char(3) NOT NULL,
        card_hmac char(64),
        card_network varchar(16),
        response_code varchar(16),
        merchant_advice_code varchar(4),
        auth_code_description varchar(16),
        processor_transaction_id varchar(128),
        message text,
        processed_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT attempts_transaction_retry UNIQUE (transaction_id, retry_number)
      )`);
    await q.query(`CREATE INDEX attempts_card_history ON attempts (card_hmac, processed_at)`);
    await q.query(`CREATE INDEX attempts_in_flight ON attempts (created_at) WHERE state = 'pending'`);
    await q.query(`
      CREATE TABLE refunds (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        vid varchar(40) NOT NULL UNIQUE,
        merchant_id uuid NOT NULL REFERENCES merchants(id),
        transaction_id uuid NOT NULL REFERENCES transactions(id) ON DELETE CASCADE,
        kind varchar(8) NOT NULL,
        amount_minor bigint NOT NULL CHECK (amount_minor >= 0),
        currency char(3) NOT NULL,
        status varchar(16) NOT NULL,
        previous_status varchar(32),
        requested_at timestamptz NOT NULL DEFAULT now(),
        "timestamp" timestamptz NOT NULL DEFAULT now(),
        sent_at timestamptz,
        processor_refund_id varchar(128),
        failure_message text,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`CREATE INDEX refunds_list ON refunds (merchant_id, "timestamp" DESC, vid DESC)`);
    await q.query(`CREATE INDEX refunds_transaction ON refunds (transaction_id)`);
    await q.query(`CREATE INDEX refunds_processing ON refunds (created_at) WHERE status = 'Processing'`);
    await q.query(`
      CREATE TABLE outbox (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        queue varchar(64) NOT NULL,
        job_name varchar(64) NOT NULL,
        payload jsonb NOT NULL,
        published_at timestamptz,
        completed_at timestamptz,
        publish_count int NOT NULL DEFAULT 0,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`CREATE INDEX outbox_open ON outbox (created_at) WHERE completed_at IS NULL`);
    await q.query(`
      CREATE TABLE webhook_messages (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        message_id char(27) NOT NULL UNIQUE,
        merchant_id uuid NOT NULL REFERENCES merchants(id),
        event_name varchar(32) NOT NULL,
        payload_id varchar(40) NOT NULL,
        transaction_id uuid,
        body jsonb NOT NULL,
        status varchar(16) NOT NULL DEFAULT 'pending',
        attempt_count int NOT NULL DEFAULT 0,
        next_attempt_at timestamptz,
        last_status_code int,
        last_error text,
        delivered_at timestamptz,
        dead_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`CREATE INDEX webhook_messages_merchant ON webhook_messages (merchant_id, created_at DESC)`);
    await q.query(`CREATE INDEX webhook_messages_due ON webhook_messages (next_attempt_at) WHERE status = 'pending'`);
    await q.query(`CREATE INDEX webhook_messages_dead ON webhook_messages (dead_at) WHERE status = 'dead'`);
    await q.query(`
      CREATE TABLE webhook_deliveries (
        id bigserial PRIMARY KEY,
        message_id char(27) NOT NULL REFERENCES webhook_messages(message_id) ON DELETE CASCADE,
        attempt int NOT NULL,
        attempted_at timestamptz NOT NULL,
        url text NOT NULL,
        status_code int,
        latency_ms int NOT NULL,
        error text
      )`);
    await q.query(`CREATE INDEX webhook_deliveries_message ON webhook_deliveries (message_id, attempt)`);
    await q.query(`
      CREATE TABLE sandbox_operations (
        idempotency_key varchar(80) PRIMARY KEY,
        kind varchar(16) NOT NULL,
        result jsonb NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    for (const t of [
      'sandbox_operations',
      'webhook_deliveries',
      'webhook_messages',
      'outbox',
      'refunds',
      'attempts',
      'transactions',
      'submissions',
      'merchant_api_keys',
      'merchants',
    ]) {
      await q.query(`DROP TABLE IF EXISTS ${t}`);
    }
  }
}
