import { isIsoCurrency, isNameable } from '@retain/domain';
import { isISO31661Alpha2 } from 'class-validator';
import { parseDateTimeMillis } from './date-time.parser';
import { unsafeTextDetail } from './unsafe-text';
import {
  METADATA_KEY_MAX_LENGTH,
  METADATA_MAX_TOTAL_LENGTH,
  METADATA_RESERVED_PREFIX,
  METADATA_VALUE_MAX_LENGTH,
  type FieldFormat,
  type FieldSpec,
} from './transaction-fields.table';

export const YYYYMM_RE = /^\d{4}(0[1-9]|1[0-2])$/;
export const SHA1_HEX_RE = /^[0-9a-fA-F]{40}$/;
/**
 * The WHATWG (HTML input type=email) address syntax with a dotted domain. One regex, shared with
 * the DTO, instead of validator.js's isEmail: several times faster on a 1000-item batch.
 */
export const EMAIL_RE =
  /^[a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)+$/;
const COUNTRY_SHAPE_RE = /^[A-Z]{2}$/;

/** A string left blank: empty or only whitespace. */
export const isBlank = (v: unknown): boolean => typeof v === 'string' && v.trim() === '';

/**
 * Whether a field's value counts as sent: not null/undefined, and not blank where the table allows
 * the field to be left blank (`blankIsAbsent`).
 */
export const isPresent = (spec: FieldSpec, v: unknown): boolean =>
  v !== undefined && v !== null && !(spec.blankIsAbsent === true && isBlank(v));

export const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

const FORMAT_RULES: Record<Exclude<FieldFormat, 'metadata'>, { test: (v: string) => boolean; detail: string }> = {
  'iso-currency': { test: isIsoCurrency, detail: 'must be an ISO 4217 currency code' },
  'date-time': {
    test: (v) => parseDateTimeMillis(v, 'required') !== null,
    detail: 'must be an ISO 8601 date-time with time zone (YYYY-MM-DDThh:mm:ssZ)',
  },
  'date-time-local': {
    test: (v) => parseDateTimeMillis(v, 'optional') !== null,
    detail: 'must be an ISO 8601 date-time (YYYY-MM-DDThh:mm:ss)',
  },
  yyyymm: { test: (v) => YYYYMM_RE.test(v), detail: 'must be in the format YYYYMM' },
  email: { test: (v) => EMAIL_RE.test(v), detail: 'must be an email address' },
  // The shape check first: class-validator's list lookup upper-cases its input.
  country: {
    test: (v) => COUNTRY_SHAPE_RE.test(v) && isISO31661Alpha2(v),
    detail: 'must be an ISO 3166-1 alpha-2 country code',
  },
  'sha1-hex': { test: (v) => SHA1_HEX_RE.test(v), detail: 'must be 40 hexadecimal characters' },
  'submission-status': { test: (v) => v === 'Failed', detail: 'must be Failed' },
  'advice-code': { test: (v) => /^[0-9A-Za-z]{2}$/.test(v), detail: 'must be 2 letters or digits' },
};

function rangeDetail(spec: FieldSpec): string {
  if (spec.min === 0 && spec.max === 1) return 'must be 0 or 1';
  if (spec.max === undefined) return `must be greater than or equal to ${spec.min}`;
  if (spec.min === undefined) return `must be less than or equal to ${spec.max}`;
  return `must be between ${spec.min} and ${spec.max}`;
}

/**
 * Whether `s` has more than `max` characters, counted as the spec and Postgres's varchar count them
 * (code points: a character outside the Basic Multilingual Plane, two UTF-16 code units, is one).
 */
export function longerThan(s: string, max: number): boolean {
  if (s.length <= max) return false;
  if (s.length > 2 * max) return true;
  let n = 0;
  for (const _ of s) if (++n > max) return true;
  return false;
}

/**
 * Checks one present (not null/undefined) value against its spec. Returns the detail of the first
 * failure (e.g. `must be at most 128 characters`) or null. Details never echo the value: it may be
 * card data.
 */
export function checkField(spec: FieldSpec, value: unknown): string | null {
  switch (spec.kind) {
    case 'string': {
      if (typeof value !== 'string') return 'must be a string';
      if (spec.required === true && value.length === 0) return 'must not be empty';
      if (spec.maxLength !== undefined && longerThan(value, spec.maxLength)) {
        return `must be at most ${spec.maxLength} characters`;
      }
      if (spec.format !== undefined && spec.format !== 'metadata') {
        const rule = FORMAT_RULES[spec.format];
        if (!rule.test(value)) return rule.detail;
      }
      return null;
    }
    case 'number':
      if (typeof value !== 'number' || !Number.isFinite(value)) return 'must be a number';
      if (spec.exclusiveMin !== undefined && !(value > spec.exclusiveMin)) {
        return `must be greater than ${spec.exclusiveMin}`;
      }
      return null;
    case 'integer':
      if (typeof value !== 'number' || !Number.isInteger(value)) return 'must be an integer';
      if ((spec.min !== undefined && value < spec.min) || (spec.max !== undefined && value > spec.max)) {
        return rangeDetail(spec);
      }
      return null;
    case 'boolean':
      return typeof value === 'boolean' ? null : 'must be a boolean';
    case 'object':
      return isPlainObject(value) ? null : 'must be an object';
    default: {
      const never: never = spec.kind;
      throw new Error(`unknown field kind ${String(never)}`);
    }
  }
}

/** A metadata key is named in a message only when it cannot carry a card number (isNameable). */
function describeKey(key: string): string {
  return isNameable(key) ? `metadata.${key}` : 'metadata key';
}

/** Spec "Metadata" rules as `[path, detail]` pairs; empty when the object is valid. */
export function metadataProblems(metadata: Record<string, unknown>): [string, string][] {
  const problems: [string, string][] = [];
  let total = 0;
  for (const key in metadata) {
    if (!Object.hasOwn(metadata, key)) continue;
    // Reported (without the key) by the walk of unsafeTextProblems.
    if (unsafeTextDetail(key) !== null) continue;
    const value = metadata[key];
    if (longerThan(key, METADATA_KEY_MAX_LENGTH)) {
      problems.push(['metadata', `key must be at most ${METADATA_KEY_MAX_LENGTH} characters`]);
      continue;
    }
    if (key.startsWith(METADATA_RESERVED_PREFIX)) {
      problems.push([describeKey(key), `uses the reserved prefix ${METADATA_RESERVED_PREFIX}`]);
      continue;
    }
    if (typeof value !== 'string') problems.push([describeKey(key), 'must be a string']);
    else if (longerThan(value, METADATA_VALUE_MAX_LENGTH)) {
      problems.push([describeKey(key), `must be at most ${METADATA_VALUE_MAX_LENGTH} characters`]);
    } else total += key.length + value.length;
  }
  if (problems.length === 0 && total > METADATA_MAX_TOTAL_LENGTH) {
    problems.push(['metadata', `must be at most ${METADATA_MAX_TOTAL_LENGTH} characters in all`]);
  }
  return problems;
}
