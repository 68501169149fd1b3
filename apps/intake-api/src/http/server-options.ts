import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { HttpException, HttpStatus } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import { MERCHANT_ID_MAX_LENGTH } from '@retain/api-contract';
import type { RetainConfig } from '@retain/config';
import { RetCode, RetMessage, newRequestId } from '@retain/domain';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { scan as refuseProtoKeys } from 'secure-json-parse';
import { exactJsonBody } from './json-body';
import { servePortal } from './portal';
import { addSecurityHeaders } from './security-headers';

/**
 * A path parameter may be a merchant id of 128 characters (spec limit), each up to 12 characters
 * once percent-encoded (4 UTF-8 bytes). Fastify's default of 100 made longer ids unreadable.
 */
const MAX_PARAM_LENGTH = MERCHANT_ID_MAX_LENGTH * 12;

/**
 * The body parameter named in a 400 for a body that cannot be read: the list a submission or a
 * refund call carries, else the body as a whole (session, experiments, webhook settings).
 */
export function bodyParam(url: string | undefined): string {
  const path = (url ?? '').split('?')[0]!.replace(/\/+$/, '');
  if (path.endsWith('/refunds')) return 'refunds';
  if (path.endsWith('/transactions')) return 'transactions';
  return 'body';
}

/**
 * Answers on a raw socket, before (or instead of) Fastify's reply: the same `{code, message}` shape
 * and `X-Request-Id` as every other answer, then the connection is closed. Nothing of the request
 * is echoed. Skipped when the socket is gone or a response has already started on it.
 */
export function answerOnSocket(socket: Duplex, status: number, code: string, message: string): void {
  const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (socket.destroyed || !socket.writable || inFlight?.headersSent) {
    socket.destroy();
    return;
  }
  const body = JSON.stringify({ code, message });
  const reason = { 400: 'Bad Request', 408: 'Request Timeout', 431: 'Request Header Fields Too Large' }[status] ?? '';
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${newRequestId()}\r\nConnection: close\r\n\r\n${body}`,
    () => socket.destroy(),
  );
}

const requestTimedOut = (socket: Duplex): void =>
  answerOnSocket(socket, 408, 'RET408', 'Request timeout: the request was not received in time');

/**
 * Errors Node's HTTP parser raises before a request exists (broken framing, headers too large,
 * not HTTP at all) and Node's request timeout. Fastify's default answer has another shape and no
 * request id.
 */
function clientErrorHandler(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') return requestTimedOut(socket);
  if (err.code === 'HPE_HEADER_OVERFLOW') {
    return answerOnSocket(socket, 431, 'RET431', 'Request header fields too large');
  }
  answerOnSocket(socket, 400, RetCode.RET400, RetMessage.invalidParameter('request'));
}

/**
 * Errors of Fastify's router: a URL that does not decode (FST_ERR_BAD_URL) and a path parameter
 * longer than any id (FST_ERR_MAX_PARAM_LENGTH, so no such id exists). Fastify's default answer
 * echoes the URL, which may carry a card number, to an unauthenticated caller.
 */
function frameworkErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const tooLong = error.code === 'FST_ERR_MAX_PARAM_LENGTH';
  void reply
    .code(tooLong ? HttpStatus.NOT_FOUND : HttpStatus.BAD_REQUEST)
    .header('X-Request-Id', request.id)
    .send(
      tooLong
        ? { code: RetCode.RET0404, message: RetMessage.notFound }
        : { code: RetCode.RET400, message: RetMessage.invalidParameter('url') },
    );
}

/**
 * Fastify options of the API: every call gets a 32-hex request id (decisions §3) and `/v1/...`,
 * `/v2/...` and the bare `/retain/...` alias reach the same routes (decisions §1).
 */
export const intakeAdapterOptions = {
  genReqId: (): string => newRequestId(),
  rewriteUrl: (req: { url?: string }): string => {
    const url = req.url ?? '/';
    return url.replace(/^\/v[12](?=\/retain(?:\/|\?|$))/, '');
  },
  routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
  frameworkErrors,
  clientErrorHandler,
};

/**
 * Cuts off a request whose body has not fully arrived within the request timeout (408, socket
 * closed). Node's own `requestTimeout` does the same while the server runs, but its check stops
 * when the server starts closing: this timer also bounds a graceful shutdown.
 */
function cutOffStalledBodies(app: NestFastifyApplication, timeoutMs: number): void {
  const fastify = app.getHttpAdapter().getInstance();
  fastify.addHook('onRequest', (req, _reply, done) => {
    const raw: IncomingMessage = req.raw;
    if (!raw.complete) {
      const timer = setTimeout(() => {
        if (!raw.complete) requestTimedOut(raw.socket);
      }, timeoutMs);
      timer.unref();
      raw.once('close', () => clearTimeout(timer));
    }
    done();
  });
  // Node's checks, read when the server starts listening (configure runs before listen). Fastify's
  // keepAliveTimeout (72 s, above the usual 60 s of load balancers) closes idle kept-alive sockets;
  // connectionTimeout stays 0 (off): an idle-socket timer would also cut a slow 1000-item insert.
  // Headers that never end are cut by headersTimeout (408 through clientErrorHandler).
  const server = fastify.server as Server & { connectionsCheckingInterval: number };
  server.requestTimeout = timeoutMs;
  server.headersTimeout = Math.min(server.headersTimeout, timeoutMs);
  // How often Node checks those timeouts (default 30 s, so a 30 s timeout could take 60 s).
  server.connectionsCheckingInterval = Math.max(250, Math.min(5000, Math.floor(timeoutMs / 4)));
}

/** A JSON body the parser refuses (a duplicate or forbidden key): 400, told only to an authenticated caller. */
export class UnreadableBodyError extends HttpException {
  constructor(message: string) {
    super({ code: RetCode.RET400, message }, HttpStatus.BAD_REQUEST);
  }
}

/**
 * JSON bodies: Fastify's parser (it refuses `__proto__` / `constructor.prototype` keys), and a body
 * with the same key twice in one object is refused with 400: which value was meant is ambiguous,
 * and a proxy or log reading the first while we read the last would disagree about the request.
 * A body with an escaped key is read again exactly (exactJsonBody: V8's JSON.parse can misread
 * such a key), and that reading is checked for those keys too.
 */
function parseJsonStrictly(app: NestFastifyApplication, bodyLimit: number): void {
  const fastify = app.getHttpAdapter().getInstance();
  const secureParse = fastify.getDefaultJsonParser('error', 'error');
  // Registered through Nest, which then skips its own JSON parser at init.
  app.useBodyParser('application/json', { bodyLimit }, (req, body, done) => {
    const text = body.toString('utf8');
    // Fastify's parser answers through the callback (synchronously).
    void secureParse(req as Parameters<typeof secureParse>[0], text, (err: Error | null, value?: unknown) => {
      if (err) return done(err, undefined);
      const exact = exactJsonBody(text, value);
      if (exact === null) {
        const message = `${RetMessage.invalidParameter(bodyParam(req.url))} (duplicate key in JSON)`;
        return done(new UnreadableBodyError(message), undefined);
      }
      if (exact.value !== value) {
        try {
          refuseProtoKeys(exact.value as object, { protoAction: 'error', constructorAction: 'error' });
        } catch {
          return done(new UnreadableBodyError(RetMessage.invalidParameter(bodyParam(req.url))), undefined);
        }
      }
      done(null, exact.value);
    });
  });
}

export async function configureIntake(app: NestFastifyApplication, config: RetainConfig): Promise<void> {
  const fastify = app.getHttpAdapter().getInstance();
  fastify.addHook('onSend', (req, reply, payload, done) => {
    void reply.header('X-Request-Id', req.id);
    done(null, payload);
  });
  addSecurityHeaders(fastify, config.nodeEnv === 'production');
  cutOffStalledBodies(app, config.httpRequestTimeoutMs);
  parseJsonStrictly(app, config.bodyLimitBytes);
  const document = SwaggerModule.createDocument(
    app,
    new DocumentBuilder()
      .setTitle('Retain API')
      .setDescription(
        'Payment-failure recovery: submit failed card transactions, read recovery results, refund or stop. ' +
          'Every path is also served under /v1 and /v2 (interface 2024.06).',
      )
      .setVersion('2024.06')
      .addBasicAuth()
      .addBearerAuth()
      .addCookieAuth('cookie', { type: 'apiKey', in: 'cookie', name: 'cookie' }, 'cookie')
      .build(),
  );
  SwaggerModule.setup('docs', app, document, { jsonDocumentUrl: 'openapi.json', raw: ['json'] });
  await servePortal(app);
}
