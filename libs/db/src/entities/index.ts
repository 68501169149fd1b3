import { AttemptEntity } from './attempt.entity';
import { FailedJobEntity } from './failed-job.entity';
import { MerchantApiKeyEntity, MerchantEntity } from './merchant.entity';
import { OutboxEntity } from './outbox.entity';
import { RefundEntity } from './refund.entity';
import { SubmissionEntity } from './submission.entity';
import { TransactionEntity } from './transaction.entity';
import { WebhookDeliveryEntity, WebhookMessageEntity } from './webhook-message.entity';

export * from './attempt.entity';
export * from './failed-job.entity';
export * from './merchant.entity';
export * from './outbox.entity';
export * from './refund.entity';
export * from './submission.entity';
export * from './transaction.entity';
export * from './webhook-message.entity';

/** Every entity, listed explicitly (no globs: the bundle and the tests see the same list). */
export const ENTITIES = [
  MerchantEntity,
  MerchantApiKeyEntity,
  SubmissionEntity,
  TransactionEntity,
  AttemptEntity,
  RefundEntity,
  OutboxEntity,
  FailedJobEntity,
  WebhookMessageEntity,
  WebhookDeliveryEntity,
];
