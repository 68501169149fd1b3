import {
  Catch,
  HttpException,
  HttpStatus,
  Logger,
  NotFoundException,
  type ArgumentsHost,
  type ExceptionFilter,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { isRetryableTransactionError } from '@retain/db';
import { RetCode, RetMessage } from '@retain/domain';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

/**
 * Every error leaves as `{code, message}` (spec "Errors"): never a stack trace, never input echoed
 * back. Unknown routes are 404 RET0404; a known path with another method is 405 with `Allow`.
 */
@Catch()
export class ApiExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger('http');

  constructor(private readonly adapterHost: HttpAdapterHost) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    const ctx = host.switchToHttp();
    const reply = ctx.getResponse<FastifyReply>();
    const req = ctx.getRequest<FastifyRequest>();
    const { status, body, allow, retryAfter } = this.toResponse(exception, req);
    if (allow) void reply.header('Allow', allow.join(', '));
    if (retryAfter !== undefined) void reply.header('Retry-After', String(retryAfter));
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
  ): { status: number; body: unknown; allow?: string[]; retryAfter?: number } {
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
    if (exception instanceof HttpException) {
      const status = exception.getStatus();
      const res = exception.getResponse();
      if (typeof res === 'object' && res !== null && 'code' in res && 'message' in res) {
        return { status, body: res };
      }
      if (status === 400) {
        // Framework-level 400s (a body that is not JSON): name the body parameter.
        return { status, body: { code: RetCode.RET400, message: RetMessage.invalidParameter(bodyParam(req)) } };
      }
      return { status, body: { code: codeForStatus(status), message: messageForStatus(status) } };
    }
    const fastifyCode = (exception as { code?: string; statusCode?: number })?.code;
    const statusCode = (exception as { statusCode?: number })?.statusCode;
    if (fastifyCode === 'FST_ERR_CTP_BODY_TOO_LARGE' || statusCode === 413) {
      return { status: 413, body: { code: RetCode.RET413, message: 'Request body too large (limit 10 MiB)' } };
    }
    if (typeof statusCode === 'number' && statusCode >= 400 && statusCode < 500) {
      return { status: 400, body: { code: RetCode.RET400, message: RetMessage.invalidParameter(bodyParam(req)) } };
    }
    if (isRetryableTransactionError(exception)) {
      // A deadlock or serialization failure that outlived the service's retries (libs/db): nothing
      // was saved and the same call will very likely pass (decisions §16).
      return {
        status: 503,
        body: { code: RetCode.RET900, message: 'Unable to submit, please try again' },
        retryAfter: 1,
      };
    }
    if (isUnavailable(exception)) {
      return { status: 503, body: { code: RetCode.RET503, message: 'Service temporarily unavailable; retry later' } };
    }
    return { status: 500, body: { code: RetCode.RET500, message: 'Internal error' } };
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

/** The body parameter named in a 400 for a body that is not JSON. */
function bodyParam(req: FastifyRequest): string {
  return (req.url ?? '').includes('/refunds') ? 'refunds' : 'transactions';
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

/** Postgres or Redis unreachable: the client should retry later (spec 503). */
function isUnavailable(e: unknown): boolean {
  const code = (e as { code?: string })?.code ?? '';
  const msg = e instanceof Error ? e.message : '';
  return (
    ['ECONNREFUSED', 'ETIMEDOUT', 'ECONNRESET', '57P01', '57P03', '53300'].includes(code) ||
    /Connection terminated|timeout exceeded when trying to connect|connect ECONNREFUSED/i.test(msg)
  );
}
