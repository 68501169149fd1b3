import { Controller, Get, HttpException, HttpStatus, Query, UseGuards } from '@nestjs/common';
import {
  ApiBasicAuth,
  ApiBearerAuth,
  ApiCookieAuth,
  ApiOperation,
  ApiQuery,
  ApiResponse,
  ApiTags,
} from '@nestjs/swagger';
import { ErrorDto } from '@retain/api-contract';
import { AnalyticsRepository } from '@retain/db';
import { RetCode, RetMessage, nameOr } from '@retain/domain';
import { DataSource } from 'typeorm';
import { CurrentMerchant, MerchantAuthGuard, type AuthenticatedMerchant } from '../auth/merchant-auth.guard';
import { AnalyticsDto } from './analytics.dto';
import { NETWORK_FEES_AVOIDED_NOTE, buildAnalytics } from './analytics.figures';

const MAX_DAYS = 731;
const DEFAULT_DAYS = 30;
const DEFAULT_BREAKDOWN_LIMIT = 50;
const MAX_BREAKDOWN_LIMIT = 1000;
const DAY_MS = 86_400_000;

const badParam = (name: string): HttpException =>
  new HttpException({ code: RetCode.RET400, message: RetMessage.invalidParameter(name) }, HttpStatus.BAD_REQUEST);

/** The first day Postgres can hold: it has no year 0. */
const FIRST_DAY = '0001-01-01';

/** A YYYY-MM-DD calendar date that exists, in years 0001-9999, else null. */
function parseDay(v: unknown): string | null {
  if (typeof v !== 'string' || !/^\d{4}-\d{2}-\d{2}$/.test(v) || v < FIRST_DAY) return null;
  const t = Date.parse(`${v}T00:00:00Z`);
  return Number.isNaN(t) || new Date(t).toISOString().slice(0, 10) !== v ? null : v;
}

/** `to` - 29 days, no earlier than the first day. */
function defaultFrom(to: string): string {
  const from = new Date(Date.parse(`${to}T00:00:00Z`) - (DEFAULT_DAYS - 1) * DAY_MS).toISOString().slice(0, 10);
  // YYYY-MM-DD strings compare as the days they name.
  return from < FIRST_DAY ? FIRST_DAY : from;
}

export interface AnalyticsQuery {
  from: string;
  to: string;
  bucket: 'day' | 'week';
  breakdownLimit: number;
}

/** Query of GET /retain/analytics; every default spelled out in the OpenAPI document. */
export function parseAnalyticsQuery(q: Record<string, unknown>, today = new Date()): AnalyticsQuery {
  const known = new Set(['from', 'to', 'bucket', 'breakdown_limit']);
  // A parameter nobody knows is named only when it cannot be card data (decisions §10).
  for (const k of Object.keys(q)) if (!known.has(k)) throw badParam(nameOr(k, 'query'));
  for (const [k, v] of Object.entries(q)) if (typeof v !== 'string') throw badParam(k);
  const to = q['to'] === undefined ? today.toISOString().slice(0, 10) : parseDay(q['to']);
  if (!to) throw badParam('to');
  const from = q['from'] === undefined ? defaultFrom(to) : parseDay(q['from']);
  if (!from) throw badParam('from');
  const span = (Date.parse(to) - Date.parse(from)) / DAY_MS;
  if (span < 0 || span >= MAX_DAYS) throw badParam('from');
  const bucket = q['bucket'] ?? 'day';
  if (bucket !== 'day' && bucket !== 'week') throw badParam('bucket');
  const limitText = q['breakdown_limit'] ?? String(DEFAULT_BREAKDOWN_LIMIT);
  const breakdownLimit = /^\d{1,4}$/.test(limitText as string) ? Number(limitText) : NaN;
  if (!(breakdownLimit >= 1 && breakdownLimit <= MAX_BREAKDOWN_LIMIT)) throw badParam('breakdown_limit');
  return { from, to, bucket, breakdownLimit };
}

/**
 * GET /retain/analytics: recovery figures per currency over a range of submission days, read from
 * the rollup the database keeps as transactions, attempts and refunds change (one indexed read,
 * whatever the merchant's volume).
 */
@ApiTags('analytics')
@ApiBasicAuth()
@ApiBearerAuth()
@ApiCookieAuth()
@ApiResponse({ status: 401, type: ErrorDto, description: 'Authentication required' })
@ApiResponse({ status: 403, type: ErrorDto, description: 'Merchant disabled' })
@UseGuards(MerchantAuthGuard)
@Controller('retain/analytics')
export class AnalyticsController {
  private readonly repo: AnalyticsRepository;

  constructor(db: DataSource) {
    this.repo = new AnalyticsRepository(db);
  }

  @Get()
  @ApiOperation({
    summary:
      'Recovery analytics per currency: totals, series by day or week, success by attempt number, ' +
      'time to recover, breakdowns by decline code and class, card network, BIN and country',
    description:
      'Cohort figures: a period holds the failed transactions submitted in it (UTC days) and what became of ' +
      'them so far (attempts, recoveries, refunds, stops). Amounts in the currency’s decimal units.',
  })
  @ApiQuery({ name: 'from', required: false, description: 'First submission day, YYYY-MM-DD (default: to - 29 days)' })
  @ApiQuery({
    name: 'to',
    required: false,
    description: 'Last submission day, YYYY-MM-DD, inclusive (default: today, UTC)',
  })
  @ApiQuery({ name: 'bucket', required: false, enum: ['day', 'week'], description: 'Series period (default day)' })
  @ApiQuery({
    name: 'breakdown_limit',
    required: false,
    description: 'Keys per breakdown, most failed first (default 50, max 1000)',
  })
  @ApiResponse({ status: 200, type: AnalyticsDto })
  @ApiResponse({ status: 400, type: ErrorDto, description: 'Bad date, range over 731 days, bad bucket' })
  async analytics(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Query() query: Record<string, unknown>,
  ): Promise<AnalyticsDto> {
    const q = parseAnalyticsQuery(query);
    const rows = await this.repo.read(merchant.id, q.from, q.to, q.bucket);
    const currencies = buildAnalytics(rows, q.from, q.to, q.bucket, q.breakdownLimit);
    return {
      object: 'analytics',
      from: q.from,
      to: q.to,
      bucket: q.bucket,
      cohort: 'submission_day_utc',
      currencies,
      notes: [NETWORK_FEES_AVOIDED_NOTE],
    };
  }
}
