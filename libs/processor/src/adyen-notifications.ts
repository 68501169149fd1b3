import type * as AdyenSdk from '@adyen/api-library';

/**
 * Adyen standard webhooks (notifications): the body Adyen posts, its items, and each item's HMAC check
 * (https://docs.adyen.com/development-resources/webhooks/secure-webhooks/verify-hmac-signatures), done
 * by the official SDK's HmacValidator.
 */
export interface AdyenNotificationItem {
  eventCode: string;
  /** "true" / "false", as Adyen sends it. */
  success: string;
  pspReference: string;
  originalReference?: string;
  merchantAccountCode: string;
  merchantReference?: string;
  amount: { value: number; currency: string };
  reason?: string;
  eventDate?: string;
  /** The payment method's brand (`mc`, `visa`, ...). */
  paymentMethod?: string;
  additionalData?: Record<string, string>;
}

/** Why a notification body was refused (never an item's contents or a key). */
export class AdyenNotificationError extends Error {}

const str = (v: unknown): v is string => typeof v === 'string';
const optStr = (v: unknown): boolean => v === undefined || v === null || typeof v === 'string';

/** The items of a notification body; throws AdyenNotificationError when it is not Adyen's shape. */
export function adyenNotificationItems(body: unknown): AdyenNotificationItem[] {
  if (!body || typeof body !== 'object' || Array.isArray(body)) throw new AdyenNotificationError('not a JSON object');
  const list = (body as Record<string, unknown>)['notificationItems'];
  if (!Array.isArray(list) || list.length === 0 || list.length > 1000) {
    throw new AdyenNotificationError('notificationItems must hold 1 to 1000 items');
  }
  return list.map((wrapper, i) => {
    const item = (wrapper as Record<string, unknown> | null)?.['NotificationRequestItem'] as
      Record<string, unknown> | undefined;
    const amount = item?.['amount'] as Record<string, unknown> | undefined;
    if (
      !item ||
      !str(item['eventCode']) ||
      !str(item['success']) ||
      !str(item['pspReference']) ||
      !item['pspReference'] ||
      !str(item['merchantAccountCode']) ||
      !optStr(item['originalReference']) ||
      !optStr(item['merchantReference']) ||
      !optStr(item['reason']) ||
      !optStr(item['eventDate']) ||
      !optStr(item['paymentMethod']) ||
      !amount ||
      !Number.isSafeInteger(amount['value']) ||
      !str(amount['currency']) ||
      (item['additionalData'] !== undefined &&
        (typeof item['additionalData'] !== 'object' || item['additionalData'] === null))
    ) {
      throw new AdyenNotificationError(`notificationItems[${i}] is not a NotificationRequestItem`);
    }
    return item as unknown as AdyenNotificationItem;
  });
}

let validator: AdyenSdk.hmacValidator | undefined;

/**
 * Whether an item's `additionalData.hmacSignature` is Adyen's signature of it under `hmacKey` (hex).
 * False without a signature.
 */
export function adyenItemSigned(item: AdyenNotificationItem, hmacKey: string): boolean {
  if (!item.additionalData?.['hmacSignature']) return false;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  validator ??= new (require('@adyen/api-library') as typeof AdyenSdk).hmacValidator();
  try {
    return validator.validateHMAC(item as never, hmacKey);
  } catch {
    return false;
  }
}
