import {
  Body,
  Controller,
  Get,
  Headers,
  HttpException,
  HttpStatus,
  Param,
  Post,
  Query,
  Req,
  Res,
  UseGuards,
} from '@nestjs/common';
import { ApiBasicAuth, ApiBearerAuth, ApiHeader, ApiOperation, ApiQuery, ApiResponse, ApiTags } from '@nestjs/swagger';
import {
  ErrorDto,
  RefundListEnvelopeDto,
  SubmitRefundsBodyDto,
  SubmitRefundsResponseDto,
  parseDryrun,
  parseListRefundsQuery,
} from '@retain/api-contract';
import { RefundsRepository } from '@retain/db';
import { RetCode, RetMessage } from '@retain/domain';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { DataSource } from 'typeorm';
import { CurrentMerchant, MerchantAuthGuard, type AuthenticatedMerchant } from '../auth/merchant-auth.guard';
import { listEnvelope, pageLinks } from '../http/list-envelope';
import { ApiListRefundsQuery } from '../http/list-query.api';
import { RefundRequestService } from './refund-request.service';

const badParam = (message: string): HttpException =>
  new HttpException({ code: RetCode.RET400, message }, HttpStatus.BAD_REQUEST);

/** An Idempotency-Key: 1-255 visible ASCII characters (Stripe's form). */
const IDEMPOTENCY_KEY_RE = /^[\x21-\x7e]{1,255}$/;

@ApiTags('refunds')
@ApiBasicAuth()
@ApiBearerAuth()
@ApiResponse({ status: 401, type: ErrorDto })
@ApiResponse({
  status: 503,
  type: ErrorDto,
  description: 'A back end is down (RET900); retry after Retry-After seconds',
})
@UseGuards(MerchantAuthGuard)
@Controller('retain/refunds')
export class RefundsController {
  private readonly repo: RefundsRepository;

  constructor(
    private readonly refunds: RefundRequestService,
    db: DataSource,
  ) {
    this.repo = new RefundsRepository(db);
  }

  @Post()
  @ApiOperation({ summary: 'Refund captured transactions (wholly or partly) or stop transactions still in retry' })
  @ApiQuery({ name: 'dryrun', required: false, enum: [0, 1] })
  @ApiHeader({
    name: 'Idempotency-Key',
    required: false,
    description:
      'Up to 255 visible ASCII characters. A retry of the call with the same key and body within 24 h gets the first answer and refunds nothing more; the key with another body: 400 RET400.',
  })
  @ApiResponse({ status: 200, type: SubmitRefundsResponseDto })
  @ApiResponse({ status: 207, type: SubmitRefundsResponseDto, description: 'Some refunds rejected' })
  @ApiResponse({ status: 400, type: ErrorDto })
  async create(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Body() body: SubmitRefundsBodyDto,
    @Query('dryrun') dryrunParam: unknown,
    @Headers('idempotency-key') idempotencyKey: string | undefined,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const dryrun = parseDryrun(dryrunParam);
    if (typeof dryrun !== 'number') throw badParam(dryrun.error);
    if (idempotencyKey !== undefined && !IDEMPOTENCY_KEY_RE.test(idempotencyKey))
      throw badParam(RetMessage.invalidParameter('Idempotency-Key'));
    const result = await this.refunds.request(merchant, body as unknown, dryrun === 1, idempotencyKey ?? null);
    await reply.status(result.status).send(result.body);
  }

  @Get()
  @ApiOperation({ summary: 'List refunds by refund timestamp (since/until), newest first, cursor = refund vid' })
  @ApiListRefundsQuery()
  @ApiResponse({ status: 200, type: RefundListEnvelopeDto })
  @ApiResponse({ status: 400, type: ErrorDto })
  async list(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Query() query: Record<string, unknown>,
    @Req() req: FastifyRequest,
  ): Promise<unknown> {
    const parsed = parseListRefundsQuery(query);
    if ('error' in parsed) throw badParam(parsed.error);
    const page = await this.repo.list(merchant.id, parsed);
    if (page.unknownCursor)
      throw badParam(RetMessage.invalidParameter(parsed.startingAfter ? 'starting_after' : 'ending_before'));
    const { next, previous } = pageLinks('/retain/refunds', query, page, (r) => String(r['vid']));
    return listEnvelope(page.data, req, next, previous);
  }

  @Get(':id')
  @ApiOperation({ summary: 'The refunds of one transaction (by merchant transaction id)' })
  @ApiResponse({ status: 200, type: RefundListEnvelopeDto })
  @ApiResponse({ status: 404, type: ErrorDto })
  async ofTransaction(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Param('id') id: string,
    @Req() req: FastifyRequest,
  ): Promise<unknown> {
    const data = await this.repo.ofTransaction(merchant.id, id);
    if (!data) throw new HttpException({ code: RetCode.RET0404, message: RetMessage.notFound }, HttpStatus.NOT_FOUND);
    return listEnvelope(data, req, null, null);
  }
}
