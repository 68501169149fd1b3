import { cardBrand } from '@retain/domain';
import type { CardNetwork } from './processor.port';

/**
 * Network of a card from its number or BIN (6-8 leading digits). Maestro is a Mastercard brand
 * and follows Mastercard's rules; brands without rules of their own in network-rules.md are 'other'.
 */
export function cardNetwork(panOrBin: string): CardNetwork {
  const digits = panOrBin.replace(/[\s-]/g, '');
  switch (cardBrand(digits)) {
    case 'visa':
      return 'visa';
    case 'mastercard':
    case 'maestro':
      return 'mastercard';
    case 'amex':
      return 'amex';
    case 'discover':
      return 'discover';
    case 'jcb':
    case 'diners':
    case 'unionpay':
    case null:
      return 'other';
  }
}
