import {
  HttpException,
  HttpStatus,
  Inject,
  Injectable,
  createParamDecorator,
  type CanActivate,
  type ExecutionContext,
} from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import { MerchantsRepository, PortalSessionsRepository } from '@retain/db';
import { RetCode, RetMessage } from '@retain/domain';
import { RETAIN_CONFIG } from '@retain/platform';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { DataSource } from 'typeorm';

export interface AuthenticatedMerchant {
  id: string;
  merchantVid: string;
  login: string;
  /** How the request authenticated: an Authorization header or the portal's session cookie. */
  via?: 'header' | 'session';
}

/** decisions §14: the session cookie's name, and the header a cookie-authenticated write must carry. */
export const SESSION_COOKIE = 'cookie';
export const PORTAL_HEADER = 'x-requested-with';
export const PORTAL_HEADER_VALUE = 'retain-portal';

/**
 * Every value of one cookie in a Cookie header, in the header's order. A browser sends several under
 * one name when cookies of that name were set for different domains or paths: a sibling subdomain can
 * plant `cookie=<its token>; Domain=.example.com; Path=/v1/retain`, which is then sent first, before
 * ours. A nameless cookie whose value is `cookie=…` is sent as `cookie=…` too.
 */
export function readCookies(header: string | undefined, name: string): string[] {
  const values: string[] = [];
  if (!header) return values;
  for (const part of header.split(';')) {
    const idx = part.indexOf('=');
    if (idx < 0) continue;
    if (part.slice(0, idx).trim() === name) values.push(part.slice(idx + 1).trim());
  }
  return values;
}

const forbidden = (message: string = RetMessage.forbidden): HttpException =>
  new HttpException({ code: RetCode.RET403, message }, HttpStatus.FORBIDDEN);

/**
 * Refuses a write a browser sent from another site (its `Sec-Fetch-Site`), whatever credentials came
 * with it: an HTML form elsewhere can post here with the Basic credentials the browser cached for the
 * API's challenge (SameSite does not cover them) or log the portal in as the attacker's merchant.
 * Clients that are not browsers send no such header; reads are not refused (a link from elsewhere).
 */
export function refuseCrossSiteWrite(req: FastifyRequest): void {
  if (req.method === 'GET' || req.method === 'HEAD') return;
  const site = req.headers['sec-fetch-site'];
  if (site === 'cross-site' || site === 'same-site') {
    throw forbidden('A request sent by a browser from another site cannot change anything');
  }
}

type RequestWithMerchant = FastifyRequest & { merchant?: AuthenticatedMerchant };

export class UnauthorizedError extends HttpException {
  constructor() {
    super({ code: RetCode.RET401, message: RetMessage.authRequired }, HttpStatus.UNAUTHORIZED);
  }
}

/**
 * Credentials of decisions §2: Basic base64(login:api_key) or Bearer <api_key>. Exactly a scheme and
 * one token: anything after the token (`Bearer <key> <junk>`) is refused, not ignored.
 */
export function parseCredentials(header: string | undefined): { login?: string; apiKey: string } | null {
  if (!header) return null;
  const m = /^(\S+) +(\S+)$/.exec(header);
  if (!m) return null;
  const [, scheme, value] = m as unknown as [string, string, string];
  if (/^bearer$/i.test(scheme)) return { apiKey: value };
  if (/^basic$/i.test(scheme)) {
    const decoded = Buffer.from(value, 'base64').toString('utf8');
    const idx = decoded.indexOf(':');
    if (idx < 0) return null;
    return { login: decoded.slice(0, idx), apiKey: decoded.slice(idx + 1) };
  }
  return null;
}

/**
 * Looks the key up on every request: one indexed query (SHA-256 of the key -> unique key_hash,
 * joined to its merchant), no cache, so `merchant disable` (403) and `merchant rotate-key` (401 for
 * the old key) apply to the very next call. The key hash is a fast SHA-256 of a 32+ char random
 * key, so there is no expensive verification worth caching.
 *
 * Without an Authorization header, the portal's session cookie (decisions §14) authenticates
 * instead: the session is looked up server-side (expired or ended: 401), and a cookie-authenticated
 * request that may change something (not GET/HEAD) must carry `X-Requested-With: retain-portal`
 * (403 otherwise): a cross-site form cannot set that header, so this is the CSRF check on top of
 * SameSite=Strict. An Authorization header, when present, wins over the cookie. A request carrying
 * more than one session cookie is refused (401) without looking any up: one of them was planted
 * (readCookies), and which is ours cannot be told, so taking one would let a sibling subdomain log the
 * portal in as its own merchant.
 */
@Injectable()
export class MerchantAuthGuard implements CanActivate {
  private readonly merchants: MerchantsRepository;
  private readonly sessions: PortalSessionsRepository;

  constructor(db: DataSource, @Inject(RETAIN_CONFIG) config: RetainConfig) {
    this.merchants = new MerchantsRepository(db, config.cardKeys);
    this.sessions = new PortalSessionsRepository(db);
  }

  async canActivate(context: ExecutionContext): Promise<boolean> {
    await this.authenticate(
      context.switchToHttp().getRequest<RequestWithMerchant>(),
      context.switchToHttp().getResponse<FastifyReply>(),
    );
    return true;
  }

  /**
   * Sets the request's merchant, or throws the 401 (with its Basic challenge) or 403 to answer. Also
   * run by the exception filter for a body the parser refused before any guard ran (decisions §2:
   * missing or wrong credentials answer 401, whatever the body).
   */
  async authenticate(req: RequestWithMerchant, reply: FastifyReply): Promise<void> {
    const fail = (): never => {
      // Not for the portal's own requests: a browser answers a Basic challenge with a login dialog
      // (a headless one waits for it forever); the portal shows its own login page instead.
      if (req.headers['x-requested-with'] !== PORTAL_HEADER_VALUE)
        void reply.header('WWW-Authenticate', 'Basic realm="retain"');
      throw new UnauthorizedError();
    };
    refuseCrossSiteWrite(req);
    const tokens = req.headers.authorization ? [] : readCookies(req.headers.cookie, SESSION_COOKIE);
    if (tokens.length > 1) return fail();
    const token = tokens[0];
    if (token) {
      const merchant = await this.sessions.resume(token);
      if (!merchant) return fail();
      if (merchant.disabledAt) throw forbidden();
      if (req.method !== 'GET' && req.method !== 'HEAD' && req.headers[PORTAL_HEADER] !== PORTAL_HEADER_VALUE) {
        throw forbidden(`A portal request that changes something must carry X-Requested-With: ${PORTAL_HEADER_VALUE}`);
      }
      req.merchant = { id: merchant.id, merchantVid: merchant.merchantVid, login: merchant.login, via: 'session' };
      return;
    }
    const creds = parseCredentials(req.headers.authorization);
    if (!creds || !creds.apiKey.startsWith('rk_')) return fail();
    const merchant = await this.merchants.findByApiKey(creds.apiKey);
    if (!merchant || (creds.login !== undefined && creds.login !== merchant.login)) return fail();
    if (merchant.disabledAt) throw forbidden();
    req.merchant = { id: merchant.id, merchantVid: merchant.merchantVid, login: merchant.login, via: 'header' };
  }
}

/** The authenticated merchant of the request (set by MerchantAuthGuard). */
export const CurrentMerchant = createParamDecorator((_data: unknown, ctx: ExecutionContext) => {
  const req = ctx.switchToHttp().getRequest<RequestWithMerchant>();
  if (!req.merchant) throw new UnauthorizedError();
  return req.merchant;
});
