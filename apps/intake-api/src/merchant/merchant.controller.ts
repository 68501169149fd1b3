import {
  Body,
  Controller,
  Get,
  HttpCode,
  HttpException,
  HttpStatus,
  Inject,
  Logger,
  Param,
  Post,
  Put,
  Query,
  Req,
  Res,
  UseGuards,
} from '@nestjs/common';
import {
  ApiBasicAuth,
  ApiBearerAuth,
  ApiBody,
  ApiCookieAuth,
  ApiOperation,
  ApiProperty,
  ApiQuery,
  ApiResponse,
  ApiTags,
} from '@nestjs/swagger';
import { ErrorDto, longerThan } from '@retain/api-contract';
import type { RetainConfig } from '@retain/config';
import { MerchantsRepository, WebhookMessagesRepository, type TestPushLimit } from '@retain/db';
import { EventName, RetCode, RetMessage, newMessageId, newVid, parseWebhookUrl } from '@retain/domain';
import { RETAIN_CONFIG } from '@retain/platform';
import { OutboxRelay, announce } from '@retain/queues';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { DataSource } from 'typeorm';
import {
  CurrentMerchant,
  MerchantAuthGuard,
  SESSION_COOKIE,
  type AuthenticatedMerchant,
} from '../auth/merchant-auth.guard';
import { listEnvelope, simplePage } from '../http/list-envelope';

const badParam = (name: string, detail = ''): HttpException =>
  new HttpException(
    { code: RetCode.RET400, message: `${RetMessage.invalidParameter(name)}${detail}` },
    HttpStatus.BAD_REQUEST,
  );
const notFound = (): HttpException =>
  new HttpException({ code: RetCode.RET0404, message: RetMessage.notFound }, HttpStatus.NOT_FOUND);

const MESSAGE_STATUSES = ['pending', 'delivered', 'dead', 'gone', 'no_endpoint'];

/**
 * A merchant's test pushes (a new one or the replay of one), counted in Postgres so every replica
 * agrees (WebhookMessagesRepository.testPushWait): at most 10 made or sent within the last hour.
 * Each is sent up to 8 times, its every answer and error shown in the push log: without a limit a
 * merchant could probe hosts and ports from the dispatcher's network, or flood a third party.
 */
export const TEST_PUSH_LIMIT: TestPushLimit = { count: 10, windowSeconds: 3600 };

/** 429 RET429 with Retry-After: the merchant's test push limit is reached. */
const tooManyTestPushes = (reply: FastifyReply, wait: number): HttpException => {
  void reply.header('Retry-After', String(wait));
  return new HttpException(
    { code: RetCode.RET429, message: 'Too many test pushes, try again later' },
    HttpStatus.TOO_MANY_REQUESTS,
  );
};

export class MerchantDto {
  @ApiProperty() login: string;
  @ApiProperty() merchant_vid: string;
  @ApiProperty({ nullable: true, type: String }) webhook_url: string | null;
}

export class WebhookUrlDto {
  @ApiProperty({ nullable: true, type: String, example: 'https://example.com/retain/pushes' })
  url: string | null;
}

export class NewApiKeyDto {
  @ApiProperty({ description: 'The new API key: shown once, stored only as a hash' }) api_key: string;
}

export class NewWebhookSecretDto {
  @ApiProperty({ description: 'The new signing secret (whsec_...): shown once' }) webhook_secret: string;
}

export class TestPushDto {
  @ApiProperty({ description: 'message_id of the test push; follow it in the push delivery log' })
  message_id: string;
}

/**
 * The merchant's own settings, for the API and the portal: API key and webhook secret rotation
 * (each new value answered once), the webhook URL and a test push. The operator CLI keeps its own
 * commands; both go through MerchantsRepository.
 */
@ApiTags('merchant')
@ApiBasicAuth()
@ApiBearerAuth()
@ApiCookieAuth()
@ApiResponse({ status: 401, type: ErrorDto, description: 'Authentication required' })
@ApiResponse({
  status: 403,
  type: ErrorDto,
  description: 'Merchant disabled, or a cookie-authenticated write without X-Requested-With: retain-portal',
})
@UseGuards(MerchantAuthGuard)
@Controller('retain/merchant')
export class MerchantController {
  private readonly logger = new Logger('merchant');
  private readonly merchants: MerchantsRepository;
  private readonly pushes: WebhookMessagesRepository;
  private readonly secure: boolean;

  constructor(
    private readonly db: DataSource,
    private readonly relay: OutboxRelay,
    @Inject(RETAIN_CONFIG) config: RetainConfig,
  ) {
    this.merchants = new MerchantsRepository(db, config.cardKeys);
    this.pushes = new WebhookMessagesRepository(db);
    this.secure = config.nodeEnv === 'production';
  }

  @Get()
  @ApiOperation({ summary: 'The authenticated merchant: login, merchant_vid and webhook URL (never a key or secret)' })
  @ApiResponse({ status: 200, type: MerchantDto })
  async merchant(@CurrentMerchant() merchant: AuthenticatedMerchant): Promise<MerchantDto> {
    const m = await this.merchants.findById(merchant.id);
    return { login: merchant.login, merchant_vid: merchant.merchantVid, webhook_url: m?.webhookUrl ?? null };
  }

  @Post('api-key/rotate')
  @HttpCode(200)
  @ApiOperation({
    summary: 'Rotate the API key: a new key answered once; every older key stops working at once',
    description:
      'Every portal session of the merchant ends too (a session made with this call gets its cookie cleared): ' +
      'log in again with the new key.',
  })
  @ApiResponse({ status: 200, type: NewApiKeyDto })
  async rotateApiKey(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<NewApiKeyDto> {
    const rotated = await this.merchants.rotateKey(merchant.login);
    if (merchant.via === 'session') {
      void reply.header(
        'Set-Cookie',
        `${SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0${this.secure ? '; Secure' : ''}`,
      );
    }
    void reply.header('Cache-Control', 'no-store');
    return { api_key: rotated.api_key! };
  }

  @Post('webhook-secret/rotate')
  @HttpCode(200)
  @ApiOperation({ summary: 'Rotate the webhook signing secret: the new secret answered once, used from the next push' })
  @ApiResponse({ status: 200, type: NewWebhookSecretDto })
  async rotateWebhookSecret(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<NewWebhookSecretDto> {
    const rotated = await this.merchants.rotateWebhookSecret(merchant.login);
    void reply.header('Cache-Control', 'no-store');
    return { webhook_secret: rotated.webhook_secret! };
  }

  @Get('webhook')
  @ApiOperation({ summary: 'The webhook URL pushes are sent to (null: none)' })
  @ApiResponse({ status: 200, type: WebhookUrlDto })
  async webhook(@CurrentMerchant() merchant: AuthenticatedMerchant): Promise<WebhookUrlDto> {
    const m = await this.merchants.findById(merchant.id);
    return { url: m?.webhookUrl ?? null };
  }

  @Put('webhook')
  @ApiOperation({ summary: 'Set the webhook URL (absolute http or https; null removes it); the secret is kept' })
  @ApiBody({ type: WebhookUrlDto })
  @ApiResponse({ status: 200, type: WebhookUrlDto })
  @ApiResponse({ status: 400, type: ErrorDto })
  async setWebhook(@CurrentMerchant() merchant: AuthenticatedMerchant, @Body() body: unknown): Promise<WebhookUrlDto> {
    const raw = typeof body === 'object' && body !== null && 'url' in body ? (body as { url: unknown }).url : undefined;
    const url = parseWebhookUrl(raw);
    if (url === undefined) throw badParam('url');
    await this.merchants.setWebhook(merchant.login, url);
    return { url };
  }

  @Post('webhook/test')
  @HttpCode(202)
  @ApiOperation({
    summary: 'Send a test push (event_name "test") to the webhook URL, signed like every push',
    description:
      'Delivered, retried and logged like any push; it reports no state change and can be ignored. ' +
      'At most 10 test pushes per merchant count at a time: each for an hour after it was last made, sent or ' +
      'replayed; beyond that 429 RET429 with Retry-After (seconds), and no push is made.',
  })
  @ApiResponse({ status: 202, type: TestPushDto })
  @ApiResponse({ status: 429, type: ErrorDto, description: 'Too many test pushes (Retry-After)' })
  async testPush(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<TestPushDto> {
    const messageId = newMessageId();
    const outbox = await this.db.transaction(async (m) => {
      const wait = await this.pushes.testPushWait(m, merchant.id, TEST_PUSH_LIMIT);
      if (wait > 0) throw tooManyTestPushes(reply, wait);
      return announce(m, [
        {
          merchantId: merchant.id,
          eventName: EventName.Test,
          payloadId: newVid(),
          content: { message: 'Test push from Retain' },
          messageId,
        },
      ]);
    });
    this.relay.publish(outbox).catch((err: unknown) => {
      this.logger.warn({ err: (err as Error).message }, 'outbox publish deferred to the sweeper');
    });
    return { message_id: messageId };
  }
}

/** The merchant's push delivery log, with replay. */
@ApiTags('webhook-messages')
@ApiBasicAuth()
@ApiBearerAuth()
@ApiCookieAuth()
@ApiResponse({ status: 401, type: ErrorDto, description: 'Authentication required' })
@UseGuards(MerchantAuthGuard)
@Controller('retain/webhook-messages')
export class WebhookMessagesController {
  private readonly repo: WebhookMessagesRepository;

  constructor(db: DataSource) {
    this.repo = new WebhookMessagesRepository(db);
  }

  @Get()
  @ApiOperation({ summary: 'Push messages, newest first (List envelope; cursor starting_after = message_id)' })
  @ApiQuery({ name: 'status', required: false, enum: MESSAGE_STATUSES })
  @ApiQuery({
    name: 'transaction_id',
    required: false,
    description: 'Only the pushes of this transaction (merchant id)',
  })
  @ApiQuery({ name: 'limit', required: false, description: '1-100, default 20' })
  @ApiQuery({ name: 'starting_after', required: false })
  @ApiResponse({ status: 200 })
  @ApiResponse({ status: 400, type: ErrorDto })
  async list(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Query() query: Record<string, unknown>,
    @Req() req: FastifyRequest,
  ): Promise<unknown> {
    const asked = simplePage(query, {
      known: ['status', 'transaction_id', 'limit', 'starting_after'],
      defaultLimit: 20,
      maxLimit: 100,
      cursor: /^[0-9A-Za-z]{27}$/,
    });
    if ('bad' in asked) throw badParam(asked.bad);
    const { limit, startingAfter } = asked;
    const status = (query['status'] as string | undefined) ?? null;
    if (status !== null && !MESSAGE_STATUSES.includes(status)) throw badParam('status');
    const transactionId = (query['transaction_id'] as string | undefined) ?? null;
    if (transactionId !== null && (transactionId.length === 0 || longerThan(transactionId, 128))) {
      throw badParam('transaction_id');
    }
    const page = await this.repo.listOfMerchant(merchant.id, { status, transactionId, startingAfter, limit });
    const last = page.data[page.data.length - 1];
    const params = new URLSearchParams(
      Object.entries({ ...query, starting_after: last ? String(last['message_id']) : '' }) as [string, string][],
    );
    const next = page.hasMore && last ? `/v1/retain/webhook-messages?${params.toString()}` : null;
    return listEnvelope(page.data, req, next, null);
  }

  @Get(':message_id')
  @ApiOperation({ summary: 'One push: its body and every delivery attempt (time, URL, status code, latency, error)' })
  @ApiResponse({ status: 200 })
  @ApiResponse({ status: 404, type: ErrorDto })
  async one(@CurrentMerchant() merchant: AuthenticatedMerchant, @Param('message_id') id: string): Promise<unknown> {
    if (!/^[0-9A-Za-z]{27}$/.test(id)) throw notFound();
    const message = await this.repo.oneOfMerchant(merchant.id, id);
    if (!message) throw notFound();
    return message;
  }

  @Post(':message_id/replay')
  @HttpCode(202)
  @ApiOperation({
    summary: 'Deliver a push again (a dead one, typically): same message_id, a fresh schedule of attempts',
  })
  @ApiResponse({ status: 202, description: '{message_id, status: "pending"}' })
  @ApiResponse({ status: 400, type: ErrorDto, description: 'The message is still being delivered' })
  @ApiResponse({ status: 404, type: ErrorDto })
  @ApiResponse({
    status: 429,
    type: ErrorDto,
    description: 'A test push, and the merchant has too many counting (as POST /v1/retain/merchant/webhook/test)',
  })
  async replay(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Param('message_id') id: string,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<{ message_id: string; status: string }> {
    if (!/^[0-9A-Za-z]{27}$/.test(id)) throw notFound();
    const outcome = await this.repo.replayOfMerchant(merchant.id, id, TEST_PUSH_LIMIT);
    if (outcome === 'missing') throw notFound();
    if (outcome === 'pending') throw badParam('message_id', ' (still being delivered)');
    if (typeof outcome === 'object') throw tooManyTestPushes(reply, outcome.wait);
    return { message_id: id, status: 'pending' };
  }
}
