import 'reflect-metadata';
import { ApiProperty, type ApiPropertyOptions } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  IsBoolean,
  IsDefined,
  IsIn,
  IsInt,
  IsISO31661Alpha2,
  IsISO4217CurrencyCode,
  IsISO8601,
  IsNotEmpty,
  IsNumber,
  IsObject,
  IsOptional,
  IsString,
  Matches,
  Max,
  MaxLength,
  Min,
  ValidateBy,
  ValidateIf,
  ValidateNested,
} from 'class-validator';
import { EMAIL_RE, SHA1_HEX_RE, YYYYMM_RE, isBlank, isPlainObject, metadataProblems } from './field-rules';
import {
  TRANSACTION_FIELDS,
  type FieldFormat,
  type FieldSpec,
  type TransactionFieldPath,
  requiredInSchema,
} from './transaction-fields.table';

/** Metadata key of the table path a DTO property was declared with (read by the drift test). */
export const CONTRACT_FIELD_PATH = 'retain:contractFieldPath';

// Decorators only need `name` and `validate`; the messages of the hand-written validator are the API's.
const IsMetadata = (): PropertyDecorator =>
  ValidateBy({
    name: 'isMetadata',
    validator: { validate: (v: unknown) => isPlainObject(v) && metadataProblems(v).length === 0 },
  });

const LOCAL_DATE_TIME_PATTERN = '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d{1,9})?(Z|[+-]\\d{2}:?\\d{2})?$';

const FORMAT_DECORATORS: Record<FieldFormat, { validators: PropertyDecorator[]; schema: ApiPropertyOptions }> = {
  'iso-currency': {
    validators: [Matches(/^[A-Z]{3}$/), IsISO4217CurrencyCode()],
    schema: { pattern: '^[A-Z]{3}$', example: 'USD' },
  },
  'date-time': { validators: [IsISO8601({ strict: true })], schema: { format: 'date-time' } },
  'date-time-local': {
    validators: [Matches(new RegExp(LOCAL_DATE_TIME_PATTERN))],
    schema: { pattern: LOCAL_DATE_TIME_PATTERN },
  },
  yyyymm: { validators: [Matches(YYYYMM_RE)], schema: { pattern: YYYYMM_RE.source, example: '202812' } },
  email: { validators: [Matches(EMAIL_RE)], schema: { format: 'email' } },
  country: { validators: [IsISO31661Alpha2()], schema: { pattern: '^[A-Z]{2}$', example: 'US' } },
  'sha1-hex': { validators: [Matches(SHA1_HEX_RE)], schema: { pattern: SHA1_HEX_RE.source } },
  'submission-status': { validators: [IsIn(['Failed'])], schema: {} },
  'advice-code': { validators: [Matches(/^[0-9A-Za-z]{2}$/)], schema: { pattern: '^[0-9A-Za-z]{2}$', example: '25' } },
  metadata: {
    validators: [IsMetadata()],
    schema: { type: 'object', additionalProperties: { type: 'string', maxLength: 1024 } },
  },
};

/**
 * A writable Transaction field: OpenAPI schema and class-validator rules generated from its entry
 * in TRANSACTION_FIELDS (required flag, max length, range, format). An object field names its DTO
 * class with `type: () => Cls` (Swagger recognises a lazy type by the function name `type`).
 */
export function ContractField(path: TransactionFieldPath, options: ApiPropertyOptions = {}): PropertyDecorator {
  const spec: FieldSpec = TRANSACTION_FIELDS[path];
  const nested =
    spec.kind === 'object' && typeof options.type === 'function' ? (options.type as () => new () => object) : null;
  const required = requiredInSchema(path);
  const decorators: PropertyDecorator[] = [required ? IsDefined() : IsOptional()];
  const schema: Record<string, unknown> = { required };

  switch (spec.kind) {
    case 'string':
      decorators.push(IsString());
      schema['type'] = 'string';
      if (required) {
        decorators.push(IsNotEmpty());
        schema['minLength'] = 1;
      }
      break;
    case 'number':
      decorators.push(IsNumber({ allowNaN: false, allowInfinity: false }));
      schema['type'] = 'number';
      break;
    case 'integer':
      decorators.push(IsInt());
      schema['type'] = 'integer';
      break;
    case 'boolean':
      decorators.push(IsBoolean());
      schema['type'] = 'boolean';
      break;
    case 'object':
      if (nested) {
        decorators.push(
          ValidateNested(),
          Type(() => nested()),
        );
      } else {
        decorators.push(IsObject());
      }
      break;
  }
  if (spec.maxLength !== undefined) {
    decorators.push(MaxLength(spec.maxLength));
    schema['maxLength'] = spec.maxLength;
  }
  if (spec.min !== undefined) {
    decorators.push(Min(spec.min));
    schema['minimum'] = spec.min;
  }
  if (spec.max !== undefined) {
    decorators.push(Max(spec.max));
    schema['maximum'] = spec.max;
  }
  if (spec.exclusiveMin !== undefined) {
    // class-validator has no exclusive minimum: a custom rule keeps "> 0" exact.
    const bound = spec.exclusiveMin;
    decorators.push(
      ValidateBy({ name: 'exclusiveMin', constraints: [bound], validator: { validate: (v) => v > bound } }),
    );
    schema['minimum'] = bound;
    schema['exclusiveMinimum'] = true;
  }
  if (spec.format !== undefined) {
    decorators.push(...FORMAT_DECORATORS[spec.format].validators);
    Object.assign(schema, FORMAT_DECORATORS[spec.format].schema);
  }
  if (spec.blankIsAbsent === true) {
    // Left blank, the field is not checked, as when it is left out; the schema's pattern allows it.
    decorators.push(ValidateIf((_: object, v: unknown) => !isBlank(v)));
    const pattern = schema['pattern'];
    if (typeof pattern === 'string') schema['pattern'] = `^(?:${pattern.replace(/^\^|\$$/g, '')}|\\s*)$`;
  }
  decorators.push(ApiProperty({ ...(schema as ApiPropertyOptions), ...options } as ApiPropertyOptions));

  return (target, key) => {
    Reflect.defineMetadata(CONTRACT_FIELD_PATH, path, target, key);
    for (const d of decorators) d(target, key);
  };
}

/** Marks a DTO property that is accepted but not validated or stored (see the drift test). */
export const CONTRACT_FIELD_IGNORED = 'retain:contractFieldIgnored';

/** Part of the spec's resource tree but not used on submission (e.g. payment_method.account). */
export function IgnoredField(options: ApiPropertyOptions = {}): PropertyDecorator {
  const decorators = [IsOptional(), ApiProperty({ required: false, ...options } as ApiPropertyOptions)];
  return (target, key) => {
    Reflect.defineMetadata(CONTRACT_FIELD_IGNORED, true, target, key);
    for (const d of decorators) d(target, key);
  };
}

/** A read-only field of the spec: documented in responses, ignored when a merchant sends it. */
export function ReadOnlyField(options: ApiPropertyOptions = {}): PropertyDecorator {
  const decorators = [IsOptional(), ApiProperty({ required: false, readOnly: true, ...options } as ApiPropertyOptions)];
  return (target, key) => {
    for (const d of decorators) d(target, key);
  };
}
