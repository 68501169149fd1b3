import { applyDecorators } from '@nestjs/common';
import { ApiQuery } from '@nestjs/swagger';
import { LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX } from '@retain/api-contract';
import { TRANSACTION_STATUSES } from '@retain/domain';

/**
 * OpenAPI documentation of the list endpoints' query parameters. The handlers take the raw query
 * (`@Query() Record<string, unknown>`) and parse it with the api-contract parsers, so Swagger
 * cannot infer the parameters: they are declared here, next to each other, for both lists.
 */
const DATE = 'ISO 8601 date (YYYY-MM-DD: from midnight UTC of that day) or date-time';
/** An upper bound: a plain date names the whole day it names (up to the next midnight UTC, excluded). */
const UNTIL_DATE =
  'ISO 8601 date-time (at or before that instant) or date (YYYY-MM-DD: the whole UTC day included, so ' +
  'since=D&until=D lists day D)';

const paging = [
  ApiQuery({
    name: 'limit',
    required: false,
    schema: { type: 'integer', minimum: 1, maximum: LIST_LIMIT_MAX, default: LIST_LIMIT_DEFAULT },
    description: `Page size, 1-${LIST_LIMIT_MAX} (default ${LIST_LIMIT_DEFAULT})`,
  }),
  ApiQuery({
    name: 'starting_after',
    required: false,
    type: String,
    description: 'Cursor: return the page after this item (from the `next` link); not with ending_before',
  }),
  ApiQuery({
    name: 'ending_before',
    required: false,
    type: String,
    description: 'Cursor: return the page before this item (from the `previous` link); not with starting_after',
  }),
];

/** GET /retain/transactions. */
export function ApiListTransactionsQuery(): MethodDecorator {
  return applyDecorators(
    ...paging,
    ApiQuery({
      name: 'status',
      required: false,
      type: String,
      description: `Comma-separated statuses (case-insensitive), any of: ${TRANSACTION_STATUSES.join(', ')}`,
      example: 'Captured,In Retry',
    }),
    ApiQuery({ name: 'subscription_id', required: false, type: String, description: 'Only this subscription' }),
    ApiQuery({ name: 'account_id', required: false, type: String, description: 'Only this account' }),
    ApiQuery({ name: 'submitted_since', required: false, type: String, description: `Submitted at or after; ${DATE}` }),
    ApiQuery({
      name: 'submitted_until',
      required: false,
      type: String,
      description: `Submitted at or before; ${UNTIL_DATE}`,
    }),
    ApiQuery({ name: 'updated_since', required: false, type: String, description: `Updated at or after; ${DATE}` }),
  );
}

/** GET /retain/refunds. */
export function ApiListRefundsQuery(): MethodDecorator {
  return applyDecorators(
    ...paging,
    ApiQuery({ name: 'since', required: false, type: String, description: `Refund timestamp at or after; ${DATE}` }),
    ApiQuery({
      name: 'until',
      required: false,
      type: String,
      description: `Refund timestamp at or before; ${UNTIL_DATE}`,
    }),
  );
}
