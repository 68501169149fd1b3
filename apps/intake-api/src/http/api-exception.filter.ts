import {
  Catch,
  HttpException,
  HttpStatus,
  Inject,
  Logger,
  NotFoundException,
  Optional,
  type ArgumentsHost,
  type ExceptionFilter,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { isRetryableTransactionError } from '@retain/db';
import { RetCode, RetMessage } from '@retain/domain';
import { isUnavailable } from '@retain/platform';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { MerchantAuthGuard, type AuthenticatedMerchant } from '../auth/merchant-auth.guard';
import { UnreadableBodyError, bodyParam } from './server-options';

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

/** Seconds a client is told to wait when a back end is down (decisions §16). */
export const RETRY_AFTER_SECONDS = 5;
/** The spec's text for RET900. */
const UNAVAILABLE_MESSAGE = 'Unable to submit, please try again';

/**
 * Every error leaves as `{code, message}` (spec "Errors"): never a stack trace, never input echoed
 * back. Unknown routes are 404 RET0404; a known path with another method is 405 with `Allow`.
 */
@Catch()
export class ApiExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger('http');

  constructor(
    private readonly adapterHost: HttpAdapterHost,
    @Optional() @Inject(MerchantAuthGuard) private readonly auth: MerchantAuthGuard | null = null,
  ) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    const ctx = host.switchToHttp();
    const reply = ctx.getResponse<FastifyReply>();
    const req = ctx.getRequest<FastifyRequest & { merchant?: AuthenticatedMerchant }>();
    const response = this.toResponse(exception, req);
    // A body refused while parsing, before any guard ran: decisions §2 answers missing or wrong
    // credentials with 401 whatever the body, so the caller is authenticated first (not on the login
    // call, which has no credentials to give).
    if (this.auth && response.unreadableBody && !req.merchant && needsCredentials(req)) {
      void this.auth.authenticate(req, reply).then(
        () => this.send(reply, exception, response),
        (refused: unknown) => this.send(reply, refused, this.toResponse(refused, req)),
      );
      return;
    }
    this.send(reply, exception, response);
  }

  private send(
    reply: FastifyReply,
    exception: unknown,
    { status, body, allow, retryAfter }: ReturnType<ApiExceptionFilter['toResponse']>,
  ): void {
    if (allow) void reply.header('Allow', allow.join(', '));
    const wait = retryAfter ?? (status === 503 ? RETRY_AFTER_SECONDS : undefined);
    if (wait !== undefined) void reply.header('Retry-After', String(wait));
    if (status >= 500) {
      this.logger.error(
        { err: exception instanceof Error ? { type: exception.name, message: exception.message } : 'unknown' },
        'request failed',
      );
    }
    void reply.status(status).send(body);
  }

  private toResponse(
    exception: unknown,
    req: FastifyRequest,
  ): { status: number; body: unknown; allow?: string[]; retryAfter?: number; unreadableBody?: boolean } {
    if (exception instanceof NotFoundException && this.isRouteMiss(exception)) {
      const allowed = this.allowedMethods(req);
      if (allowed.length > 0) {
        return {
          status: HttpStatus.METHOD_NOT_ALLOWED,
          body: { code: RetCode.RET405, message: `Method not allowed; allowed: ${allowed.join(', ')}` },
          allow: allowed,
        };
      }
      return { status: 404, body: { code: RetCode.RET0404, message: RetMessage.notFound } };
    }
    if (exception instanceof UnreadableBodyError)
      return { status: 400, body: exception.getResponse(), unreadableBody: true };
    if (exception instanceof HttpException) {
      const status = exception.getStatus();
      const res = exception.getResponse();
      if (typeof res === 'object' && res !== null && 'code' in res && 'message' in res) {
        return { status, body: res };
      }
      // Framework-level 400s and 415s (a body that is not JSON): name the body parameter.
      if (status === 400 || status === 415) return this.unreadableBody(req);
      const body = { code: codeForStatus(status), message: messageForStatus(status) };
      // A body over the limit, refused while it arrived.
      return status === 413 ? { status, body, unreadableBody: true } : { status, body };
    }
    const fastifyCode = (exception as { code?: string; statusCode?: number })?.code;
    const statusCode = (exception as { statusCode?: number })?.statusCode;
    if (fastifyCode === 'FST_ERR_CTP_BODY_TOO_LARGE' || statusCode === 413) {
      return {
        status: 413,
        body: { code: RetCode.RET413, message: 'Request body too large (limit 10 MiB)' },
        unreadableBody: true,
      };
    }
    if (typeof statusCode === 'number' && statusCode >= 400 && statusCode < 500) {
      // Not JSON, another content type, a body cut short: decisions §4 "Not JSON: 400 RET400".
      return this.unreadableBody(req);
    }
    if (isRetryableTransactionError(exception)) {
      // A deadlock or serialization failure that outlived the service's retries (libs/db): nothing
      // was saved and the same call will very likely pass (decisions §16).
      return {
        status: 503,
        body: { code: RetCode.RET900, message: UNAVAILABLE_MESSAGE },
        retryAfter: 1,
      };
    }
    if (isUnavailable(exception)) {
      return { status: 503, body: { code: RetCode.RET900, message: UNAVAILABLE_MESSAGE } };
    }
    return { status: 500, body: { code: RetCode.RET500, message: 'Internal error' } };
  }

  private unreadableBody(req: FastifyRequest): { status: number; body: unknown; unreadableBody: true } {
    return {
      status: 400,
      body: { code: RetCode.RET400, message: RetMessage.invalidParameter(bodyParam(req.url)) },
      unreadableBody: true,
    };
  }

  private isRouteMiss(e: NotFoundException): boolean {
    const res = e.getResponse();
    return typeof res === 'object' && res !== null && !('code' in res);
  }

  /**
   * Methods with a route matching this concrete path. `findRoute` runs the router's matching, so
   * `/retain/transactions/abc` finds `GET /retain/transactions/:id` (`hasRoute` compares patterns
   * and would only work for paths without parameters). The URL is the rewritten one (`/v1`, `/v2`
   * and the bare alias all reach `/retain/...`).
   */
  private allowedMethods(req: FastifyRequest): string[] {
    const fastify = this.adapterHost.httpAdapter.getInstance<FastifyInstance>();
    const url = (req.url ?? '').split('?')[0] ?? '';
    const allowed: string[] = METHODS.filter(
      (method) => method !== req.method && fastify.findRoute({ method, url }) !== null,
    );
    if (allowed.includes('GET')) allowed.push('HEAD');
    return allowed;
  }
}

/**
 * Every API path takes credentials but the portal's login (POST /retain/session), the public keys,
 * and the processors' notifications (signed item by item, never by a merchant's key).
 */
function needsCredentials(req: FastifyRequest): boolean {
  const path = (req.url ?? '').split('?')[0]!.replace(/\/+$/, '');
  return (
    path.startsWith('/retain/') &&
    path !== '/retain/session' &&
    !path.startsWith('/retain/keys') &&
    !path.startsWith('/retain/processors/')
  );
}

function codeForStatus(status: number): string {
  if (status === 401) return RetCode.RET401;
  if (status === 403) return RetCode.RET403;
  if (status === 404) return RetCode.RET0404;
  if (status === 405) return RetCode.RET405;
  if (status === 413) return RetCode.RET413;
  if (status === 503) return RetCode.RET503;
  if (status >= 500) return RetCode.RET500;
  return RetCode.RET400;
}

function messageForStatus(status: number): string {
  if (status === 401) return RetMessage.authRequired;
  if (status === 404) return RetMessage.notFound;
  if (status === 413) return 'Request body too large (limit 10 MiB)';
  if (status >= 500) return 'Internal error';
  return 'Bad request';
}
