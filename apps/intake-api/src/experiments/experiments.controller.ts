import {
  Body,
  Controller,
  Get,
  HttpCode,
  HttpException,
  HttpStatus,
  Inject,
  Param,
  Post,
  Query,
  Req,
  UseGuards,
} from '@nestjs/common';
import {
  ApiBasicAuth,
  ApiBearerAuth,
  ApiBody,
  ApiCookieAuth,
  ApiOperation,
  ApiQuery,
  ApiResponse,
  ApiTags,
} from '@nestjs/swagger';
import { ErrorDto } from '@retain/api-contract';
import type { RetainConfig } from '@retain/config';
import { ExperimentsRepository } from '@retain/db';
import { RetCode, RetMessage, newExperimentId, parseExperiment } from '@retain/domain';
import { RETAIN_CONFIG } from '@retain/platform';
import { experimentView } from '@retain/recovery';
import type { FastifyRequest } from 'fastify';
import { DataSource } from 'typeorm';
import { CurrentMerchant, MerchantAuthGuard, type AuthenticatedMerchant } from '../auth/merchant-auth.guard';
import { listEnvelope, simplePage } from '../http/list-envelope';

const notFound = (): HttpException =>
  new HttpException({ code: RetCode.RET0404, message: RetMessage.notFound }, HttpStatus.NOT_FOUND);
const badParam = (name: string): HttpException =>
  new HttpException({ code: RetCode.RET400, message: RetMessage.invalidParameter(name) }, HttpStatus.BAD_REQUEST);
const ID = /^exp_[A-Za-z0-9_-]{1,36}$/;
/** Page sizes of the list: each experiment on a page reads its results from its transactions. */
const LIST_DEFAULT = 10;
const LIST_MAX = 100;

/**
 * Policy experiments (issue 11, an extension of the spec): a merchant runs retry-policy variants
 * side by side on its new transactions, with a holdout kept on the default policy, and reads
 * per-arm results with 95% intervals. One experiment runs at a time; its variants never change.
 */
@ApiTags('experiments')
@ApiBasicAuth()
@ApiBearerAuth()
@ApiCookieAuth()
@ApiResponse({ status: 401, type: ErrorDto, description: 'Authentication required' })
@ApiResponse({ status: 403, type: ErrorDto, description: 'Merchant disabled' })
@UseGuards(MerchantAuthGuard)
@Controller('retain/experiments')
export class ExperimentsController {
  constructor(
    private readonly db: DataSource,
    @Inject(RETAIN_CONFIG) private readonly config: RetainConfig,
  ) {}

  @Post()
  @HttpCode(201)
  @ApiOperation({
    summary: 'Start a policy experiment',
    description:
      'New transactions are assigned an arm by a hash of the experiment and the transaction id (sticky): ' +
      '`holdout_share` of them keep the default policy (arm `holdout`), the rest go to the variants by weight. ' +
      'A variant names a policy version (`utc-heuristics-2026-10` or `adaptive-2026-11`), an optional `weight` ' +
      '(default 1), `learning` (default true) and `config` overrides of the tunables that policy reads ' +
      '(any other setting is refused with 400 naming it). ' +
      '409 while another experiment runs.',
  })
  @ApiBody({
    schema: {
      type: 'object',
      required: ['name', 'variants'],
      example: {
        name: 'adaptive vs heuristics',
        holdout_share: 0.1,
        variants: [
          { name: 'adaptive', policy_version: 'adaptive-2026-11' },
          { name: 'heuristics', policy_version: 'utc-heuristics-2026-10' },
        ],
      },
    },
  })
  @ApiResponse({ status: 201, description: 'The experiment, running' })
  @ApiResponse({ status: 400, type: ErrorDto })
  @ApiResponse({ status: 409, type: ErrorDto, description: 'Another experiment is running' })
  async create(@CurrentMerchant() merchant: AuthenticatedMerchant, @Body() body: unknown): Promise<unknown> {
    const parsed = parseExperiment(body);
    if (!parsed.ok)
      throw new HttpException(
        { code: RetCode.RET400, message: `${RetMessage.invalidParameter(parsed.field)} (${parsed.detail})` },
        HttpStatus.BAD_REQUEST,
      );
    const row = await ExperimentsRepository.create(this.db, {
      id: newExperimentId(),
      merchant_id: merchant.id,
      name: parsed.name,
      holdout_share: parsed.holdout_share,
      holdout_policy: this.config.retryPolicy,
      variants: parsed.variants,
    });
    if (!row) {
      const running = await ExperimentsRepository.running(this.db, merchant.id);
      throw new HttpException(
        {
          code: RetCode.RET409,
          message: `Conflict: experiment ${running?.id ?? ''} is running (stop it first)`,
        },
        HttpStatus.CONFLICT,
      );
    }
    return experimentView(row, []);
  }

  @Get()
  @ApiOperation({
    summary: "The merchant's experiments, newest first, with their results (List envelope; cursor starting_after = id)",
    description:
      "Paged as the other lists, since each experiment's results are read from its transactions: " +
      `\`limit\` 1-${LIST_MAX} (default ${LIST_DEFAULT}), \`next\` names the following page.`,
  })
  @ApiQuery({ name: 'limit', required: false, description: `1-${LIST_MAX}, default ${LIST_DEFAULT}` })
  @ApiQuery({ name: 'starting_after', required: false, description: 'An experiment id (from `next`)' })
  @ApiResponse({ status: 400, type: ErrorDto })
  async list(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Query() query: Record<string, unknown>,
    @Req() req: FastifyRequest,
  ): Promise<unknown> {
    const asked = simplePage(query, {
      known: ['limit', 'starting_after'],
      defaultLimit: LIST_DEFAULT,
      maxLimit: LIST_MAX,
      cursor: ID,
    });
    if ('bad' in asked) throw badParam(asked.bad);
    const { limit } = asked;
    const page = await ExperimentsRepository.list(this.db, merchant.id, asked);
    if (!page) throw badParam('starting_after');
    const data = [];
    for (const row of page.data)
      data.push(experimentView(row, await ExperimentsRepository.moments(this.db, merchant.id, row.id)));
    const last = page.data[page.data.length - 1];
    const next =
      page.hasMore && last
        ? `/v1/retain/experiments?${new URLSearchParams({ limit: String(limit), starting_after: last.id }).toString()}`
        : null;
    return listEnvelope(data as Record<string, unknown>[], req, next, null);
  }

  @Get(':id')
  @ApiOperation({
    summary: 'One experiment with per-arm results',
    description:
      'Per arm and currency: transactions assigned and still in flight, recovered count and amount, recovery rate ' +
      '(Wilson 95% interval), recovered amount per transaction (95% interval), attempts, attempts per recovery, ' +
      'median days to recover, and the difference from the holdout with its 95% interval.',
  })
  @ApiResponse({ status: 404, type: ErrorDto })
  async get(@CurrentMerchant() merchant: AuthenticatedMerchant, @Param('id') id: string): Promise<unknown> {
    if (!ID.test(id)) throw notFound();
    const row = await ExperimentsRepository.get(this.db, merchant.id, id);
    if (!row) throw notFound();
    return experimentView(row, await ExperimentsRepository.moments(this.db, merchant.id, id));
  }

  @Post(':id/stop')
  @HttpCode(200)
  @ApiOperation({
    summary: 'Stop an experiment',
    description: 'New transactions get the default policy again; transactions already assigned keep their arm.',
  })
  @ApiResponse({ status: 404, type: ErrorDto })
  async stop(@CurrentMerchant() merchant: AuthenticatedMerchant, @Param('id') id: string): Promise<unknown> {
    if (!ID.test(id)) throw notFound();
    const row = await ExperimentsRepository.stop(this.db, merchant.id, id);
    if (!row) throw notFound();
    return experimentView(row, await ExperimentsRepository.moments(this.db, merchant.id, id));
  }
}
