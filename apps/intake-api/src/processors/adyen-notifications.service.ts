import { HttpException, HttpStatus, Inject, Injectable, Logger } from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import {
  ProcessorAccountsRepository,
  ProcessorNotificationsRepository,
  type NewProcessorNotification,
  type StoredProcessorAccount,
} from '@retain/db';
import { RetCode } from '@retain/domain';
import { RETAIN_CONFIG } from '@retain/platform';
import {
  AdyenNotificationError,
  adyenItemSigned,
  adyenNotificationItems,
  parseAccountConfig,
  type AdyenNotificationItem,
} from '@retain/processor';
import { OutboxRelay, QueueName, addToOutbox } from '@retain/queues';
import { DataSource } from 'typeorm';

interface Verifier {
  accountId: string;
  merchantId: string;
  merchantAccountCode: string;
  hmacKey: string;
}

/** An opened Adyen account version's verifier; null when it has no hmac_key (or its config is unreadable). */
function verifierOf(a: StoredProcessorAccount): Verifier | null {
  let parsed;
  try {
    parsed = parseAccountConfig(a.processor, a.config);
  } catch {
    return null;
  }
  if (parsed.processor !== 'adyen' || !parsed.config.hmac_key) return null;
  return {
    accountId: a.id,
    merchantId: a.merchantId,
    merchantAccountCode: parsed.config.merchant_account,
    hmacKey: parsed.config.hmac_key,
  };
}

/**
 * Adyen standard webhooks (notifications) of merchants' Adyen accounts that have an `hmac_key`.
 * Each item names its Adyen merchant account (merchantAccountCode); it is Retain's when its HMAC
 * verifies under the key of one of the accounts (any merchant's, any version) configured with that
 * merchant_account, and it is stored once per merchant whose account verified it. One item that
 * verifies under none refuses the whole body (401), storing nothing: Adyen sends it again.
 */
@Injectable()
export class AdyenNotificationsService {
  private readonly logger = new Logger(AdyenNotificationsService.name);
  private readonly accounts: ProcessorAccountsRepository;
  /** Opened account versions by id (null: no hmac_key): see verifiers(). */
  private readonly opened = new Map<string, Verifier | null>();

  constructor(
    private readonly db: DataSource,
    private readonly relay: OutboxRelay,
    @Inject(RETAIN_CONFIG) config: RetainConfig,
  ) {
    this.accounts = new ProcessorAccountsRepository(db, config.cardKeys);
  }

  /** Stores the verified items with their outbox rows; returns how many were new. */
  async receive(body: unknown): Promise<{ items: number; stored: number }> {
    let items: AdyenNotificationItem[];
    try {
      items = adyenNotificationItems(body);
    } catch (e) {
      if (!(e instanceof AdyenNotificationError)) throw e;
      throw new HttpException({ code: RetCode.RET400, message: `Not an Adyen notification: ${e.message}` }, 400);
    }
    const verifiers = await this.verifiers();
    const live = String((body as Record<string, unknown>)['live']) === 'true';
    const rows: NewProcessorNotification[] = [];
    for (const item of items) {
      const merchants = new Set<string>();
      for (const v of verifiers.get(item.merchantAccountCode) ?? []) {
        if (merchants.has(v.merchantId) || !adyenItemSigned(item, v.hmacKey)) continue;
        merchants.add(v.merchantId);
        rows.push(this.row(item, v, live));
      }
      if (merchants.size === 0) {
        this.logger.warn(
          { event: item.eventCode, psp: item.pspReference },
          'Adyen notification refused: its HMAC signature verifies under no account of its merchant account',
        );
        throw new HttpException(
          { code: RetCode.RET401, message: 'Notification signature (HMAC) not valid' },
          HttpStatus.UNAUTHORIZED,
        );
      }
    }
    const outbox = await this.db.transaction(async (m) => {
      const ids = await ProcessorNotificationsRepository.insertNew(m, rows);
      return addToOutbox(
        m,
        ids.map((notificationId) => ({ queue: QueueName.ProcessorNotification, data: { v: 1, notificationId } })),
      );
    });
    this.relay.publish(outbox).catch((err: unknown) => {
      this.logger.warn({ err: (err as Error).message }, 'outbox publish deferred to the sweeper');
    });
    this.logger.log({ items: items.length, stored: outbox.length }, 'Adyen notifications accepted');
    return { items: items.length, stored: outbox.length };
  }

  /**
   * The Adyen accounts with an hmac_key, by merchant_account, current versions first. Configs are
   * sealed and the endpoint takes no credentials: each version is opened once per process (its config
   * never changes) and kept, so a flood of posts reads one list of ids, never every config again.
   */
  private async verifiers(): Promise<Map<string, Verifier[]>> {
    const ids = await this.accounts.idsOf('adyen');
    const unseen = ids.filter((id) => !this.opened.has(id));
    // A version that cannot be opened (its key no longer configured) verifies nothing, in this
    // process: the keys come from its environment. The others still serve.
    const unreadable = (id: string, err: Error) => {
      this.opened.set(id, null);
      this.logger.error(
        { account: id, err: err.message },
        'an Adyen account config cannot be opened: its notifications are refused',
      );
    };
    for (const a of await this.accounts.byIds(unseen, unreadable)) this.opened.set(a.id, verifierOf(a));
    // Versions gone (their merchant deleted) are forgotten.
    const current = new Set(ids);
    for (const id of this.opened.keys()) if (!current.has(id)) this.opened.delete(id);
    const byCode = new Map<string, Verifier[]>();
    for (const id of ids) {
      const v = this.opened.get(id);
      if (!v) continue;
      const list = byCode.get(v.merchantAccountCode) ?? [];
      list.push(v);
      byCode.set(v.merchantAccountCode, list);
    }
    return byCode;
  }

  private row(item: AdyenNotificationItem, v: Verifier, live: boolean): NewProcessorNotification {
    return {
      processor: 'adyen',
      merchantId: v.merchantId,
      accountId: v.accountId,
      merchantAccountCode: item.merchantAccountCode,
      eventCode: item.eventCode,
      success: item.success === 'true',
      pspReference: item.pspReference,
      originalReference: item.originalReference || null,
      merchantReference: item.merchantReference || null,
      amountValue: item.amount.value,
      currency: item.amount.currency,
      reason: item.reason || null,
      eventDate: item.eventDate || null,
      live,
      // A refusal's codes only (additionalData may hold card details: never stored).
      refusalReasonRaw: text(item.additionalData?.['refusalReasonRaw']),
      merchantAdviceCode: text(item.additionalData?.['merchantAdviceCode']),
      paymentMethod: text(item.paymentMethod)?.slice(0, 64) ?? null,
    };
  }
}

/** A short string field of a notification, else null. */
function text(v: unknown): string | null {
  return typeof v === 'string' && v !== '' ? v.slice(0, 200) : null;
}
