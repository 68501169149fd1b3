/** RET error codes of the spec, with the message each one carries. */
export const RetCode = {
  RET001: 'RET001',
  RET002: 'RET002',
  RET003: 'RET003',
  RET004: 'RET004',
  RET005: 'RET005',
  RET006: 'RET006',
  RET007: 'RET007',
  RET008: 'RET008',
  RET009: 'RET009',
  RET010: 'RET010',
  RET011: 'RET011',
  RET012: 'RET012',
  RET015: 'RET015',
  RET027: 'RET027',
  RET900: 'RET900',
  RETDUP: 'RETDUP',
  RETDUP2: 'RETDUP2',
  RET400: 'RET400',
  RET401: 'RET401',
  RET403: 'RET403',
  RET0404: 'RET0404',
  RET405: 'RET405',
  RET409: 'RET409',
  RET413: 'RET413',
  RET429: 'RET429',
  RET500: 'RET500',
  RET503: 'RET503',
} as const;
export type RetCode = (typeof RetCode)[keyof typeof RetCode];

export interface ErrorEntry {
  code: string;
  message: string;
}

export const RetMessage = {
  /** service-spec, Account.external_id: another account of the merchant holds it. */
  accountUpdateFailed: 'Failed to update Account',
  duplicateInSubmission: 'Duplicate transaction within submission',
  duplicatePrior: 'Duplicate transaction from prior submission',
  subscriptionProcessing: 'A transaction for the same subscription is still processing',
  previouslyProcessed: 'Transaction was previously submitted and processed',
  missing: (path: string): string => `Missing transaction element: ${path}`,
  schema: (path: string, detail: string): string => `Schema validation error: ${path} ${detail}`,
  invalidCard: 'Credit card number is not valid or incorrectly encrypted',
  token: 'Unable to process provided tokenized payment method',
  check: (detail: string): string => `Did not pass validation check: ${detail}`,
  refundCancelled: 'Refund refused: transaction was cancelled and is no longer in the retry phase',
  refundExceeds: 'Refund refused: requested amount exceeds refundable amount',
  invalidParameter: (name: string): string => `Invalid parameter: ${name}`,
  notFound: 'No matching results found',
  authRequired: 'Authentication required',
  forbidden: 'Merchant is disabled',
} as const;
