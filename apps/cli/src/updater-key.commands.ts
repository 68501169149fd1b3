import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { PaymentMethodsRepository } from '@retain/db';
import { parseUpdaterPublicKey } from '@retain/processor';
import type { CliContext } from './main';

/**
 * `merchant set-updater-key|remove-updater-key` (decisions §15, service-spec `account_updated`):
 * the merchant's public encryption key. The account updater runs for every merchant; with a key,
 * updated card numbers are also offered back, only as a JWE encrypted to it. Removing it withdraws
 * the JWEs already offered (masked values stay).
 */
export function registerUpdaterKeyCommands(merchant: Command, ctx: CliContext): void {
  merchant
    .command('set-updater-key')
    .requiredOption('--login <login>')
    .requiredOption(
      '--public-key-file <file>',
      'public key: JWK (JSON) or PEM; RSA (RSA-OAEP-256) or EC/X25519 (ECDH-ES)',
    )
    .action(async (o: { login: string; publicKeyFile: string }) => {
      let text: string;
      try {
        text = readFileSync(o.publicKeyFile, 'utf8');
      } catch (e) {
        throw new Error(`cannot read the key file (${(e as NodeJS.ErrnoException).code ?? 'error'})`);
      }
      const key = parseUpdaterPublicKey(text);
      const m = await PaymentMethodsRepository.setUpdaterKey(await ctx.db(), o.login, key);
      if (!m) throw new Error(`no merchant with login "${o.login}"`);
      ctx.print({
        merchant_vid: m.merchant_vid,
        login: o.login,
        updated_numbers: 'jwe',
        updater_key: { alg: key.alg, enc: 'A256GCM', ...key.jwk },
      });
    });
  merchant
    .command('remove-updater-key')
    .requiredOption('--login <login>')
    .action(async (o: { login: string }) => {
      const m = await PaymentMethodsRepository.setUpdaterKey(await ctx.db(), o.login, null);
      if (!m) throw new Error(`no merchant with login "${o.login}"`);
      ctx.print({ merchant_vid: m.merchant_vid, login: o.login, updated_numbers: 'masked' });
    });
}
