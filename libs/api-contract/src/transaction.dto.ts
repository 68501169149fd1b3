import { ApiProperty } from '@nestjs/swagger';
import { AuthCodeDescription, TRANSACTION_STATUSES } from '@retain/domain';
import { Type } from 'class-transformer';
import { ArrayMaxSize, ArrayMinSize, IsArray, ValidateNested } from 'class-validator';
import { ListEnvelopeBaseDto } from './common.dto';
import { ContractField, IgnoredField, ReadOnlyField } from './contract-field.decorator';
import { RefundDto } from './refund.dto';
import { MAX_TRANSACTIONS_PER_CALL } from './transaction-fields.table';

// Resource tree of the spec ("Resources and their fields"), field names exact. Limits and required
// flags come from TRANSACTION_FIELDS through @ContractField.

export class AddressDto {
  @ContractField('payment_method.billing_address.line1') line1?: string;
  @ContractField('payment_method.billing_address.line2') line2?: string;
  @ContractField('payment_method.billing_address.line3') line3?: string;
  @ContractField('payment_method.billing_address.city') city?: string;
  @ContractField('payment_method.billing_address.county') county?: string;
  @ContractField('payment_method.billing_address.district', { description: 'State or province, free-form' })
  district?: string;
  @ContractField('payment_method.billing_address.postal_code') postal_code?: string;
  @ContractField('payment_method.billing_address.country', { description: 'ISO 3166-1 alpha-2' })
  country?: string;
}

export class AccountDto {
  @ContractField('account.id', { description: "Merchant's unique customer identifier" })
  id: string;

  @ReadOnlyField({ maxLength: 40 })
  vid?: string;

  @ContractField('account.external_id', { nullable: true, description: 'Additional identifier, unique per merchant' })
  external_id?: string | null;

  @ContractField('account.email') email?: string;
}

export class SubscriptionDto {
  @ContractField('subscription.id') id: string;

  @ContractField('subscription.starts', {
    description: 'First successful billing: YYYY-MM-DDThh:mm:ss, optional fraction and zone',
  })
  starts?: string;

  @ContractField('subscription.affiliate') affiliate?: string;
  @ContractField('subscription.sub_affiliate') sub_affiliate?: string;
}

export class CreditCardDto {
  @ContractField('payment_method.credit_card.account', {
    description:
      'Required unless is_tokenized. A full number (clear, or a compact JWE under GET /v1/retain/keys), ' +
      'a masked number (6-8 digit BIN, masked middle, last 4) with account_hash, or with tokenization ' +
      'the 6-8 digit BIN. Responses show it masked.',
  })
  account?: string;

  @ContractField('payment_method.credit_card.account_hash', {
    description:
      'SHA-1 hex of the digits of the full number; computed by the service for full numbers. Required with a ' +
      'masked number; may be left blank (empty, taken as absent) with a full number or a token',
  })
  account_hash?: string;

  @ContractField('payment_method.credit_card.expiration_date', { description: 'YYYYMM; required unless is_tokenized' })
  expiration_date?: string;

  @ReadOnlyField({ type: Boolean, description: 'Card details were updated by an account updater' })
  account_updated?: boolean;

  @ReadOnlyField({
    nullable: true,
    description:
      'Extension: the updated card ({"account","expiration_date"}) as a compact JWE encrypted to the ' +
      "merchant's account-updater public key; present only when the updater changed the card and the " +
      'merchant has registered a key',
  })
  account_update_jwe?: string | null;
}

export class PaymentMethodDto {
  @ContractField('payment_method.id', { description: 'Merchant identifier of the payment method, or the token' })
  id: string;

  @ReadOnlyField({ maxLength: 40 })
  vid?: string;

  @IgnoredField({ type: () => AccountDto, description: "Not used on submission: the transaction's account applies" })
  account?: AccountDto;

  @ContractField('payment_method.account_holder') account_holder?: string;

  @ContractField('payment_method.billing_address', { type: () => AddressDto })
  billing_address?: AddressDto;

  @ContractField('payment_method.is_tokenized', { default: false })
  is_tokenized: boolean;

  @ReadOnlyField({ default: 'CreditCard', enum: ['CreditCard'] })
  type?: string;

  @ContractField('payment_method.credit_card', {
    type: () => CreditCardDto,
    description: 'Required unless is_tokenized (then optional: the BIN and expiration may be given)',
  })
  credit_card?: CreditCardDto;

  @ContractField('payment_method.primary', { default: 1 }) primary?: number;
}

export class TransactionDto {
  @ReadOnlyField({ maxLength: 40, description: 'Service-generated unique identifier' })
  vid?: string;

  @ContractField('id', { description: 'Merchant identifier of the transaction' })
  id: string;

  @ContractField('timestamp', { description: 'When the transaction failed (or, for attempts, was processed)' })
  timestamp: string;

  @ReadOnlyField({ format: 'date-time', description: 'When the merchant submitted the transaction (UTC)' })
  submitted_ts?: string;

  @ContractField('amount', { example: 19.99, description: 'At most the decimals of the currency' })
  amount: number;

  @ReadOnlyField({ type: 'number', description: 'Total amount of a partial-amount authorization' })
  partial_amount?: number;

  @ContractField('currency', { description: 'ISO 4217' })
  currency: string;

  @ContractField('status', { enum: TRANSACTION_STATUSES, description: 'Must be Failed on submission' })
  status?: string;

  @ContractField('division_number') division_number: string;

  @ReadOnlyField({ maxLength: 40, description: 'Identifier of a retry attempt' })
  retain_transaction_id?: string;

  @ReadOnlyField({ type: () => [RefundDto] })
  refunds?: RefundDto[];

  @ContractField('processor_transaction_id') processor_transaction_id?: string;

  @ContractField('account', { type: () => AccountDto })
  account: AccountDto;

  @ContractField('subscription', { type: () => SubscriptionDto })
  subscription: SubscriptionDto;

  @ContractField('previous_billing_count', { description: '-1 avoids a forced deposit' })
  previous_billing_count?: number;

  @ContractField('payment_method', { type: () => PaymentMethodDto })
  payment_method: PaymentMethodDto;

  @ContractField('metadata', { description: 'String key-value pairs; keys starting with retain: are reserved' })
  metadata?: Record<string, string>;

  @ReadOnlyField({ type: String, format: 'date', nullable: true, description: 'Date of the next retry' })
  next_activity?: string | null;

  @ReadOnlyField({
    type: Object,
    nullable: true,
    description:
      'Extension: why the next retry (on the submitted transaction) or this attempt (on an attempt) was planned ' +
      'where it is: the rule, the slot (day after the failure, local hour, time zone), the learned estimate when ' +
      'there is one, and the policy version',
  })
  retry_plan?: Record<string, unknown> | null;

  @ReadOnlyField({
    type: Object,
    nullable: true,
    description:
      'Extension (submitted transactions): the retry policy version fixed at intake (null: the UTC heuristics of ' +
      'before versions) and, when a policy experiment assigned it, the experiment id and arm (a variant or `holdout`)',
  })
  retry_policy?: { version: string | null; experiment_id: string | null; arm: string | null } | null;

  @ContractField('billing_descriptor') billing_descriptor?: string;
  @ContractField('auth_code', { description: "Payment provider's response code" }) auth_code: string;
  @ContractField('avs_code') avs_code?: string;
  @ContractField('cvn_code') cvn_code?: string;

  @ReadOnlyField({ type: String, nullable: true, enum: Object.values(AuthCodeDescription) })
  auth_code_description?: string | null;

  @ContractField('payment_network_transaction_id') payment_network_transaction_id?: string;

  @ReadOnlyField({ type: 'integer', description: '0 = the submitted transaction, 1.. = retry attempts' })
  retry_number?: number;

  @ReadOnlyField({ type: Boolean }) forced_deposit?: boolean;

  @ContractField('is_network_token', { description: '1: network token in payment_method.id, is_tokenized true' })
  is_network_token?: number;

  @ContractField('cryptogram') cryptogram?: string;
  @ContractField('eci_indicator') eci_indicator?: string;
  @ContractField('network_advice_code', {
    description:
      'Extension (decisions §16): Mastercard Merchant Advice Code of the original decline; a retry attempt shows the one of its own decline',
  })
  network_advice_code?: string;
}

export class SubmitTransactionsBodyDto {
  @ApiProperty({ type: () => [TransactionDto], minItems: 1, maxItems: MAX_TRANSACTIONS_PER_CALL })
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(MAX_TRANSACTIONS_PER_CALL)
  @ValidateNested({ each: true })
  @Type(() => TransactionDto)
  transactions: TransactionDto[];
}

/** List envelope of `GET /retain/transactions` and `GET /retain/transactions/{id}`. */
export class ListEnvelopeDto extends ListEnvelopeBaseDto {
  @ApiProperty({ type: () => [TransactionDto] })
  data: TransactionDto[];
}
