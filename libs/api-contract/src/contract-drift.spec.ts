import 'reflect-metadata';
import { plainToInstance } from 'class-transformer';
import { getMetadataStorage, validateSync, type ValidationError } from 'class-validator';
import { describe, expect, it } from 'vitest';
import { tokenizedTransaction, validTransaction } from '../test/transaction.fixture';
import { CONTRACT_FIELD_IGNORED, CONTRACT_FIELD_PATH } from './contract-field.decorator';
import { validateSubmission } from './submission.validator';
import { SubmitTransactionsBodyDto, TransactionDto } from './transaction.dto';
import {
  TRANSACTION_FIELDS,
  requiredInSchema,
  type FieldSpec,
  type TransactionFieldPath,
} from './transaction-fields.table';

// The DTOs (OpenAPI, contract documentation) and the hand-written hot-path validator must describe
// the same fields, limits and required flags.

type Ctor = new () => object;
const SWAGGER_PROPS = 'swagger/apiModelProperties';
const SWAGGER_PROP_LIST = 'swagger/apiModelPropertiesArray';

const swaggerOf = (cls: Ctor, key: string): Record<string, any> | undefined =>
  Reflect.getMetadata(SWAGGER_PROPS, cls.prototype, key);

/** Lazy `type: () => Cls` as well as `type: Cls` or `[Cls]`. */
function nestedClass(cls: Ctor, key: string): Ctor | undefined {
  let t = swaggerOf(cls, key)?.['type'];
  if (typeof t === 'function' && !t.prototype) t = t();
  if (Array.isArray(t)) t = t[0];
  return typeof t === 'function' && t.prototype && t !== String && t !== Number && t !== Boolean ? t : undefined;
}

function resolve(path: string): { cls: Ctor; key: string } {
  const segs = path.split('.');
  let cls: Ctor = TransactionDto;
  for (const seg of segs.slice(0, -1)) {
    const next = nestedClass(cls, seg);
    if (!next) throw new Error(`${path}: ${cls.name}.${seg} is not a nested DTO`);
    cls = next;
  }
  return { cls, key: segs.at(-1)! };
}

function validatorsOf(cls: Ctor, key: string) {
  return getMetadataStorage()
    .getTargetValidationMetadatas(cls, '', true, false)
    .filter((m) => m.propertyName === key);
}

describe('DTO decorators agree with TRANSACTION_FIELDS', () => {
  it.each(Object.entries(TRANSACTION_FIELDS as Record<string, FieldSpec>))('%s', (path, spec) => {
    const { cls, key } = resolve(path);
    expect(Reflect.getMetadata(CONTRACT_FIELD_PATH, cls.prototype, key)).toBe(path);

    const required = requiredInSchema(path as TransactionFieldPath);
    if (spec.required === true) expect(required).toBe(true);
    const api = swaggerOf(cls, key)!;
    expect(api['required']).toBe(required);
    expect(api['maxLength']).toBe(spec.maxLength);

    const validators = validatorsOf(cls, key);
    const named = (name: string) => validators.filter((m) => m.name === name || m.type === name);
    expect(named('isDefined').length).toBe(required ? 1 : 0);
    expect(named('isOptional').length).toBe(required ? 0 : 1);
    expect(named('maxLength').map((m) => m.constraints[0])).toEqual(
      spec.maxLength === undefined ? [] : [spec.maxLength],
    );
    if (spec.min !== undefined) expect(named('min').map((m) => m.constraints[0])).toEqual([spec.min]);
    if (spec.max !== undefined) expect(named('max').map((m) => m.constraints[0])).toEqual([spec.max]);
  });

  it('objects holding a required field are required in the schema', () => {
    expect(
      ['account', 'subscription', 'payment_method'].every((p) => requiredInSchema(p as TransactionFieldPath)),
    ).toBe(true);
    expect(requiredInSchema('payment_method.billing_address')).toBe(false);
  });

  it('every writable DTO property is in the table', () => {
    const seen = new Set<Ctor>();
    const unknown: string[] = [];
    const visit = (cls: Ctor): void => {
      if (seen.has(cls)) return;
      seen.add(cls);
      const keys: string[] = (Reflect.getMetadata(SWAGGER_PROP_LIST, cls.prototype) ?? []).map((k: string) =>
        k.replace(/^:/, ''),
      );
      for (const key of keys) {
        const api = swaggerOf(cls, key) ?? {};
        const path = Reflect.getMetadata(CONTRACT_FIELD_PATH, cls.prototype, key);
        const ignored = Reflect.getMetadata(CONTRACT_FIELD_IGNORED, cls.prototype, key);
        if (api['readOnly']) continue; // e.g. refunds: a response-only subtree
        if (!ignored && !(path in TRANSACTION_FIELDS)) unknown.push(`${cls.name}.${key}`);
        const nested = nestedClass(cls, key);
        if (nested && !ignored) visit(nested);
      }
    };
    visit(TransactionDto);
    expect(seen.size).toBeGreaterThanOrEqual(6);
    expect(unknown).toEqual([]);
  });
});

/** Dotted paths of class-validator failures, e.g. `payment_method.credit_card.expiration_date`. */
function failedPaths(errors: ValidationError[], prefix = ''): string[] {
  return errors.flatMap((e) => {
    const path = prefix ? `${prefix}.${e.property}` : e.property;
    return e.children?.length ? failedPaths(e.children, path) : [path];
  });
}

function fieldsRejectedByValidator(tx: unknown): string[] {
  const r = validateSubmission({ transactions: [tx] });
  if (!r.ok) throw new Error('body refused');
  const item = r.items[0]!;
  if (!('errors' in item)) return [];
  return item.errors.map((e) => /^(?:Schema validation error|Missing transaction element): (\S+)/.exec(e.message)![1]!);
}

function fieldsRejectedByDto(tx: unknown): string[] {
  const body = plainToInstance(SubmitTransactionsBodyDto, { transactions: [tx] });
  return failedPaths(validateSync(body)).map((p) => p.replace(/^transactions\.0\./, ''));
}

describe('class-validator DTOs and the hand-written validator agree on samples', () => {
  const mutate = (path: string, value: unknown) => {
    const tx = validTransaction();
    const segs = path.split('.');
    let cur: any = tx;
    for (const s of segs.slice(0, -1)) cur = cur[s];
    if (value === undefined) delete cur[segs.at(-1)!];
    else cur[segs.at(-1)!] = value;
    return tx;
  };

  it('both accept valid transactions', () => {
    const tokenNoCard = tokenizedTransaction();
    delete tokenNoCard['payment_method'].credit_card;
    // service-spec CreditCard.account_hash "may be left blank": both take a blank hash as absent.
    const blankHash = mutate('payment_method.credit_card.account_hash', '');
    for (const tx of [validTransaction(), tokenizedTransaction(), tokenNoCard, blankHash]) {
      expect(fieldsRejectedByDto(tx)).toEqual([]);
      expect(fieldsRejectedByValidator(tx)).toEqual([]);
    }
  });

  it.each([
    ['id', 'x'.repeat(129)],
    ['id', undefined],
    ['amount', 0],
    ['currency', 'usd'],
    ['timestamp', 'not a date'],
    ['status', 'Captured'],
    ['division_number', undefined],
    ['avs_code', '123456789'],
    ['previous_billing_count', -2],
    ['is_network_token', 2],
    ['account.email', 'nope'],
    ['account.id', 'a'.repeat(129)],
    ['subscription.id', undefined],
    ['subscription.starts', 'soon'],
    ['payment_method.is_tokenized', 'no'],
    ['payment_method.billing_address.country', 'XX'],
    ['payment_method.billing_address.city', 'c'.repeat(65)],
    ['payment_method.credit_card.expiration_date', '202813'],
    ['payment_method.credit_card.account_hash', 'abc'],
    ['metadata', { 'retain:x': 'y' }],
  ])('both reject %s = %j', (path, value) => {
    const tx = mutate(path, value);
    const byValidator = fieldsRejectedByValidator(tx);
    expect(byValidator).toHaveLength(1);
    const field = path === 'metadata' ? 'metadata' : path;
    expect(byValidator[0]!.startsWith(field)).toBe(true);
    expect(fieldsRejectedByDto(tx)).toEqual([field]);
  });
});
