import { Controller, Get, HttpException, HttpStatus, Inject } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import type { RetainConfig } from '@retain/config';
import { RetCode } from '@retain/domain';
import { RETAIN_CONFIG } from '@retain/platform';
import { exportJWK } from 'jose';
import { createPublicKey } from 'node:crypto';

/**
 * GET /v1/retain/keys: the public halves of the card-encryption keys as a JWKS, so merchants can
 * send card numbers as compact JWE (RSA-OAEP-256 + A256GCM). The current key comes first; older
 * keys stay listed (and decryptable) during a rotation, each under its own `kid`. Public material:
 * no authentication.
 */
@ApiTags('keys')
@Controller('retain/keys')
export class KeysController {
  private jwks: Promise<{ keys: Record<string, unknown>[] }> | null = null;

  constructor(@Inject(RETAIN_CONFIG) private readonly config: RetainConfig) {}

  @Get()
  @ApiOperation({ summary: 'Public keys (JWKS) for encrypting card numbers as compact JWE; current key first' })
  async keys(): Promise<{ keys: Record<string, unknown>[] }> {
    if (this.config.jweKeys.length === 0) {
      throw new HttpException(
        { code: RetCode.RET503, message: 'No card encryption key configured' },
        HttpStatus.SERVICE_UNAVAILABLE,
      );
    }
    this.jwks ??= Promise.all(
      this.config.jweKeys.map(async (k) => ({
        ...(await exportJWK(createPublicKey(k.privateKeyPem))),
        kid: k.kid,
        use: 'enc',
        alg: 'RSA-OAEP-256',
      })),
    ).then((keys) => ({ keys }));
    return this.jwks;
  }
}
