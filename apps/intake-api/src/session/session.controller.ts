import {
  Body,
  Controller,
  Delete,
  Get,
  HttpCode,
  HttpException,
  HttpStatus,
  Inject,
  Post,
  Req,
  Res,
  UseGuards,
} from '@nestjs/common';
import { ApiBody, ApiCookieAuth, ApiOperation, ApiProperty, ApiResponse, ApiTags } from '@nestjs/swagger';
import { ErrorDto } from '@retain/api-contract';
import type { RetainConfig } from '@retain/config';
import { MerchantsRepository, PortalSessionsRepository, hashApiKey } from '@retain/db';
import { RetCode, RetMessage } from '@retain/domain';
import { RETAIN_CONFIG } from '@retain/platform';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { DataSource } from 'typeorm';
import {
  CurrentMerchant,
  MerchantAuthGuard,
  PORTAL_HEADER,
  PORTAL_HEADER_VALUE,
  SESSION_COOKIE,
  UnauthorizedError,
  readCookies,
  refuseCrossSiteWrite,
  type AuthenticatedMerchant,
} from '../auth/merchant-auth.guard';
import { LoginThrottle } from './login-throttle';

export class SessionLoginDto {
  @ApiProperty({ example: 'acme', description: "The merchant's login" })
  login: string;

  @ApiProperty({ example: 'rk_...', description: 'One of the merchant’s live API keys' })
  api_key: string;
}

export class SessionInfoDto {
  @ApiProperty() login: string;
  @ApiProperty() merchant_vid: string;
  @ApiProperty({ enum: ['session', 'header'], description: 'How this request authenticated' })
  authenticated_by: string;
}

const MAX_FIELD = 256;

/**
 * decisions §14: the portal's session login. `POST` trades a login and API key for an HttpOnly,
 * SameSite=Strict cookie holding a random session token (only its hash is stored); `DELETE` ends the
 * session server-side and clears the cookie. Unknown login and wrong key answer the same 401.
 */
@ApiTags('session')
@Controller('retain/session')
export class SessionController {
  private readonly merchants: MerchantsRepository;
  private readonly sessions: PortalSessionsRepository;
  private readonly throttle = new LoginThrottle();
  private readonly secure: boolean;

  constructor(db: DataSource, @Inject(RETAIN_CONFIG) config: RetainConfig) {
    this.merchants = new MerchantsRepository(db, config.cardKeys);
    this.sessions = new PortalSessionsRepository(db);
    this.secure = config.nodeEnv === 'production';
  }

  @Post()
  @HttpCode(204)
  @ApiOperation({
    summary: 'Portal login: 204 and Set-Cookie cookie=<session token>; HttpOnly; SameSite=Strict; Path=/',
    description:
      'Sessions end after 12 hours, after 30 minutes without a request, on logout and when the API key is rotated. ' +
      '10 failed logins for one login from one address, or 100 from one address, within 15 minutes: 429 until the window has passed.',
  })
  @ApiBody({ type: SessionLoginDto })
  @ApiResponse({ status: 204, description: 'Logged in; the session cookie is set' })
  @ApiResponse({ status: 400, type: ErrorDto })
  @ApiResponse({ status: 401, type: ErrorDto, description: 'Wrong login or API key' })
  @ApiResponse({ status: 403, type: ErrorDto, description: 'Merchant disabled' })
  @ApiResponse({ status: 429, type: ErrorDto, description: 'Too many failed logins' })
  async login(@Body() body: unknown, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    refuseCrossSiteWrite(req);
    // decisions §14: a JSON body. A browser sends JSON to another origin only after a CORS preflight
    // (refused here), so no form of another site can log the portal in as someone else.
    const mediaType = req.headers['content-type']?.split(';')[0]!.trim().toLowerCase();
    if (mediaType !== 'application/json') {
      throw new HttpException(
        { code: RetCode.RET400, message: `${RetMessage.invalidParameter('body')} (Content-Type: application/json)` },
        HttpStatus.BAD_REQUEST,
      );
    }
    const { login, api_key: apiKey } = (body ?? {}) as Record<string, unknown>;
    for (const [name, v] of [
      ['login', login],
      ['api_key', apiKey],
    ] as const) {
      if (typeof v !== 'string' || v.length === 0 || v.length > MAX_FIELD) {
        throw new HttpException(
          { code: RetCode.RET400, message: RetMessage.invalidParameter(name) },
          HttpStatus.BAD_REQUEST,
        );
      }
    }
    // A login is braked per address (another address cannot lock its merchant out); an address
    // trying many logins is braked on its own, with room for offices behind one NAT.
    const keys = [
      [`login:${req.ip}:${login as string}`, 10],
      [`ip:${req.ip}`, 100],
    ] as const;
    const wait = this.throttle.acquire(keys);
    if (wait > 0) {
      void reply.header('Retry-After', String(wait));
      throw new HttpException(
        { code: RetCode.RET429, message: 'Too many failed logins, try again later' },
        HttpStatus.TOO_MANY_REQUESTS,
      );
    }
    // Counted as a failure from here (acquire) until the credentials prove right.
    let merchant: Awaited<ReturnType<MerchantsRepository['findByApiKey']>>;
    try {
      merchant = (apiKey as string).startsWith('rk_') ? await this.merchants.findByApiKey(apiKey as string) : null;
    } catch (err) {
      this.throttle.release(keys);
      throw err;
    }
    if (!merchant || merchant.login !== login) throw new UnauthorizedError();
    this.throttle.succeeded(keys);
    if (merchant.disabledAt) {
      throw new HttpException({ code: RetCode.RET403, message: RetMessage.forbidden }, HttpStatus.FORBIDDEN);
    }
    // Opened only while the key is still live (a rotation racing this login ends it or refuses it).
    const token = await this.sessions.open(merchant.id, hashApiKey(apiKey as string));
    if (!token) throw new UnauthorizedError();
    await reply.header('Set-Cookie', this.cookie(token)).status(204).send();
  }

  @Get()
  @UseGuards(MerchantAuthGuard)
  @ApiCookieAuth()
  @ApiOperation({ summary: 'Who is logged in (the portal asks this on load); works with any credentials' })
  @ApiResponse({ status: 200, type: SessionInfoDto })
  @ApiResponse({ status: 401, type: ErrorDto })
  whoami(@CurrentMerchant() merchant: AuthenticatedMerchant): SessionInfoDto {
    return { login: merchant.login, merchant_vid: merchant.merchantVid, authenticated_by: merchant.via ?? 'header' };
  }

  @Delete()
  @HttpCode(204)
  @ApiCookieAuth()
  @ApiOperation({
    summary: 'Portal logout: ends the session server-side and clears the cookie (204, also when no session is live)',
  })
  @ApiResponse({ status: 204 })
  @ApiResponse({ status: 403, type: ErrorDto, description: 'Cookie sent without X-Requested-With: retain-portal' })
  async logout(@Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    // Every session the request names ends (two when one was planted beside ours: see readCookies).
    const tokens = readCookies(req.headers.cookie, SESSION_COOKIE).filter((t) => t);
    if (tokens.length) {
      if (req.headers[PORTAL_HEADER] !== PORTAL_HEADER_VALUE) {
        throw new HttpException(
          {
            code: RetCode.RET403,
            message: `A portal request that changes something must carry X-Requested-With: ${PORTAL_HEADER_VALUE}`,
          },
          HttpStatus.FORBIDDEN,
        );
      }
      for (const token of tokens) await this.sessions.end(token);
    }
    await reply.header('Set-Cookie', this.cookie('', 0)).status(204).send();
  }

  private cookie(value: string, maxAge?: number): string {
    return [
      `${SESSION_COOKIE}=${value}`,
      'HttpOnly',
      'SameSite=Strict',
      'Path=/',
      ...(maxAge !== undefined ? [`Max-Age=${maxAge}`] : []),
      ...(this.secure ? ['Secure'] : []),
    ].join('; ');
  }
}
