import { Controller, Get, HttpException, HttpStatus, Inject } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import type { RetainConfig } from '@retain/config';
import { RetCode } from '@retain/domain';
import { RETAIN_CONFIG } from '@retain/platform';
import { exportJWK } from 'jose';
import { createPublicKey } from 'node:crypto';

/**
 * GET /v1/retain/keys: the public half of the card-encryption key as a JWKS, so merchants can send
 * card numbers as compact JWE (RSA-OAEP-256 + A256GCM). Public material: no authentication.
 */
@ApiTags('keys')
@Controller('retain/keys')
export class KeysController {
  private jwks: Promise<{ keys: Record<string, unknown>[] }> | null = null;

  constructor(@Inject(RETAIN_CONFIG) private readonly config: RetainConfig) {}

  @Get()
  @ApiOperation({ summary: 'Public key (JWKS) for encrypting card numbers as compact JWE' })
  async keys(): Promise<{ keys: Record<string, unknown>[] }> {
    const pem = this.config.jwePrivateKeyPem;
    if (!pem) {
      throw new HttpException(
        { code: RetCode.RET503, message: 'No card encryption key configured' },
        HttpStatus.SERVICE_UNAVAILABLE,
      );
    }
    this.jwks ??= exportJWK(createPublicKey(pem)).then((jwk) => ({
      keys: [{ ...jwk, kid: this.config.jweKeyId, use: 'enc', alg: 'RSA-OAEP-256' }],
    }));
    return this.jwks;
  }
}
