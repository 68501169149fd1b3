// Shared by the unit tests and bench/validation: a complete, valid submitted transaction.

/** A valid transaction as a merchant would send it (clear test card number). */
export function validTransaction(n = 0): Record<string, any> {
  return {
    id: `txn_${n}`,
    timestamp: '2026-11-20T10:15:30.123Z',
    amount: 19.99,
    currency: 'USD',
    status: 'Failed',
    division_number: 'div-1',
    auth_code: '51',
    avs_code: 'Y',
    cvn_code: 'M',
    payment_network_transaction_id: '123456789012345',
    processor_transaction_id: `proc_${n}`,
    previous_billing_count: 3,
    billing_descriptor: 'ACME*SUBSCRIPTION',
    account: { id: `acct_${n}`, external_id: `ext_${n}`, email: `customer${n}@example.com` },
    subscription: { id: `sub_${n}`, starts: '2025-01-01T00:00:00', affiliate: 'aff', sub_affiliate: 'sub-aff' },
    payment_method: {
      id: `pm_${n}`,
      account_holder: 'Jane Doe',
      is_tokenized: false,
      primary: 1,
      billing_address: {
        line1: '1 Main Street',
        city: 'Springfield',
        district: 'IL',
        postal_code: '62701',
        country: 'US',
      },
      credit_card: { account: '4111 1111 1111 1111', expiration_date: '202812' },
    },
    metadata: { plan: 'gold', source: 'billing-run-42' },
  };
}

/** A tokenized payment method (token in payment_method.id, BIN in credit_card.account). */
export function tokenizedTransaction(n = 0): Record<string, any> {
  const tx = validTransaction(n);
  tx['payment_method'] = { id: 'tok_sandbox_1111', is_tokenized: true, credit_card: { account: '411111' } };
  return tx;
}
