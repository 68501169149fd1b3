import {
  Body,
  Controller,
  Get,
  HttpException,
  HttpStatus,
  Param,
  Post,
  Query,
  Req,
  Res,
  UseGuards,
} from '@nestjs/common';
import { ApiBasicAuth, ApiBearerAuth, ApiOperation, ApiQuery, ApiResponse, ApiTags } from '@nestjs/swagger';
import {
  ErrorDto,
  ListEnvelopeDto,
  MERCHANT_ID_MAX_LENGTH,
  SubmitTransactionsBodyDto,
  TransactionValidationErrorsDto,
  longerThan,
  parseDryrun,
  parseListTransactionsQuery,
  parseRelated,
} from '@retain/api-contract';
import { TransactionsRepository } from '@retain/db';
import { RetCode, RetMessage } from '@retain/domain';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { DataSource } from 'typeorm';
import { CurrentMerchant, MerchantAuthGuard, type AuthenticatedMerchant } from '../auth/merchant-auth.guard';
import { listEnvelope, pageLinks } from '../http/list-envelope';
import { ApiListTransactionsQuery } from '../http/list-query.api';
import { SubmissionService } from './submission.service';

const badParam = (message: string): HttpException =>
  new HttpException({ code: RetCode.RET400, message }, HttpStatus.BAD_REQUEST);
const notFound = (): HttpException =>
  new HttpException({ code: RetCode.RET0404, message: RetMessage.notFound }, HttpStatus.NOT_FOUND);

@ApiTags('transactions')
@ApiBasicAuth()
@ApiBearerAuth()
@ApiResponse({ status: 401, type: ErrorDto, description: 'Authentication required' })
@ApiResponse({ status: 403, type: ErrorDto, description: 'Merchant disabled' })
@ApiResponse({
  status: 503,
  type: ErrorDto,
  description: 'A back end is down (RET900); retry after Retry-After seconds',
})
@UseGuards(MerchantAuthGuard)
@Controller('retain/transactions')
export class TransactionsController {
  private readonly repo: TransactionsRepository;

  constructor(
    private readonly submissions: SubmissionService,
    db: DataSource,
  ) {
    this.repo = new TransactionsRepository(db);
  }

  @Post()
  @ApiOperation({ summary: 'Submit failed transactions (up to 1000) for recovery' })
  @ApiQuery({ name: 'dryrun', required: false, enum: [0, 1] })
  @ApiResponse({ status: 200, description: 'All transactions accepted; no body' })
  @ApiResponse({ status: 207, type: TransactionValidationErrorsDto, description: 'Some transactions rejected' })
  @ApiResponse({ status: 400, type: ErrorDto })
  @ApiResponse({ status: 413, type: ErrorDto })
  async submit(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Body() body: SubmitTransactionsBodyDto,
    @Query('dryrun') dryrunParam: unknown,
    @Req() req: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const dryrun = parseDryrun(dryrunParam);
    if (typeof dryrun !== 'number') throw badParam(dryrun.error);
    const result = await this.submissions.submit(merchant, body as unknown, dryrun === 1, req.id);
    if (result.body) await reply.status(result.status).send(result.body);
    else await reply.status(200).send();
  }

  @Get()
  @ApiOperation({ summary: 'List submitted transactions, newest first, with cursor paging and filters' })
  @ApiListTransactionsQuery()
  @ApiResponse({ status: 200, type: ListEnvelopeDto })
  @ApiResponse({ status: 400, type: ErrorDto })
  async list(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Query() query: Record<string, unknown>,
    @Req() req: FastifyRequest,
  ): Promise<unknown> {
    const parsed = parseListTransactionsQuery(query);
    if ('error' in parsed) throw badParam(parsed.error);
    const page = await this.repo.list(merchant.id, parsed);
    if (page.unknownCursor)
      throw badParam(RetMessage.invalidParameter(parsed.startingAfter ? 'starting_after' : 'ending_before'));
    const { next, previous } = pageLinks('/retain/transactions', query, page, (t) => String(t['id']));
    return listEnvelope(page.data, req, next, previous);
  }

  @Get(':id')
  @ApiOperation({
    summary: 'Fetch a transaction by merchant id or retain_transaction_id; related=true adds its attempts',
  })
  @ApiQuery({ name: 'related', required: false, type: Boolean })
  @ApiResponse({ status: 200, type: ListEnvelopeDto })
  @ApiResponse({ status: 404, type: ErrorDto })
  async fetch(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Param('id') id: string,
    @Query('related') relatedParam: unknown,
    @Req() req: FastifyRequest,
  ): Promise<unknown> {
    const related = parseRelated(relatedParam);
    if (typeof related !== 'boolean') throw badParam(related.error);
    if (longerThan(id, MERCHANT_ID_MAX_LENGTH)) throw notFound();
    const data = await this.repo.fetch(merchant.id, id, related);
    if (!data) throw notFound();
    return listEnvelope(data, req, null, null);
  }
}
