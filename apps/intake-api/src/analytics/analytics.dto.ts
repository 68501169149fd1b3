import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';

/** OpenAPI shapes of GET /retain/analytics (the figures are computed in analytics.figures.ts). */
export class FiguresDto {
  @ApiProperty({ description: 'Failed transactions submitted in the period (review-rejected excluded)' })
  failed_count: number;
  @ApiProperty({ description: 'Their amount, in the currency’s decimal units' }) failed_amount: number;
  @ApiProperty({ description: 'Of those, transactions recovered (an attempt captured)' }) recovered_count: number;
  @ApiProperty({ description: 'Amount captured by the recovering attempts' }) recovered_amount: number;
  @ApiProperty({ nullable: true, type: Number, description: 'recovered_count / failed_count, 4 decimals' })
  recovery_rate: number | null;
  @ApiProperty({ nullable: true, type: Number, description: 'recovered_amount / failed_amount, 4 decimals' })
  amount_recovery_rate: number | null;
  @ApiProperty({ description: 'Retry attempts sent to the processor (any answer)' }) attempts: number;
  @ApiProperty({ nullable: true, type: Number, description: 'attempts / recovered_count, 2 decimals' })
  attempts_per_recovery: number | null;
  @ApiProperty({ description: 'Completed refunds that gave money back' }) refunded_count: number;
  @ApiProperty() refunded_amount: number;
  @ApiProperty({ description: 'Transactions stopped by a stop request before recovery' }) stopped_count: number;
  @ApiProperty({ description: 'recovered_amount - refunded_amount' }) net_recovered_amount: number;
}

export class PeriodFiguresDto extends FiguresDto {
  @ApiProperty({ example: '2026-11-02', description: 'First day of the period (weeks start on Monday)' })
  period_start: string;
}

export class KeyFiguresDto extends FiguresDto {
  @ApiProperty({ example: '51' }) key: string;
}

export class SuccessByAttemptDto {
  @ApiProperty() attempt_number: number;
  @ApiProperty() attempts: number;
  @ApiProperty() recovered: number;
  @ApiProperty({ nullable: true, type: Number }) success_rate: number | null;
}

export class TimeToRecoverDto {
  @ApiProperty() recovered_count: number;
  @ApiProperty({ nullable: true, type: Number, description: 'Median whole hours from failure to capture' })
  p50_hours: number | null;
  @ApiProperty({ nullable: true, type: Number }) p90_hours: number | null;
  @ApiProperty({ nullable: true, type: Number }) p50_days: number | null;
  @ApiProperty({ nullable: true, type: Number }) p90_days: number | null;
}

export class BreakdownsDto {
  @ApiProperty({ type: [KeyFiguresDto], description: 'By the original decline code (auth_code)' })
  decline_code: KeyFiguresDto[];
  @ApiProperty({ type: [KeyFiguresDto], description: 'soft, hard, or unclassified (review pending)' })
  decline_class: KeyFiguresDto[];
  @ApiProperty({ type: [KeyFiguresDto], description: 'visa, mastercard, amex, ... or unknown' })
  card_network: KeyFiguresDto[];
  @ApiProperty({ type: [KeyFiguresDto], description: 'First 6 digits of the card number' }) bin: KeyFiguresDto[];
  @ApiProperty({ type: [KeyFiguresDto], description: 'Billing address country' }) country: KeyFiguresDto[];
}

export class CurrencyAnalyticsDto {
  @ApiProperty({ example: 'USD' }) currency: string;
  @ApiProperty({ type: FiguresDto }) totals: FiguresDto;
  @ApiProperty({
    type: Number,
    description:
      'USD: excess-reattempt fees a naive daily schedule (30 days, blind to the network rules) would have paid on ' +
      'the transactions of the range whose recovery ended, minus the fees our attempts paid (0: they are guarded)',
  })
  network_fees_avoided: number;
  @ApiProperty({ type: [PeriodFiguresDto] }) series: PeriodFiguresDto[];
  @ApiProperty({ type: [SuccessByAttemptDto] }) success_by_attempt: SuccessByAttemptDto[];
  @ApiProperty({ type: TimeToRecoverDto }) time_to_recover: TimeToRecoverDto;
  @ApiProperty({ type: BreakdownsDto }) breakdowns: BreakdownsDto;
}

export class AnalyticsDto {
  @ApiProperty({ example: 'analytics' }) object: string;
  @ApiProperty({ example: '2026-11-01' }) from: string;
  @ApiProperty({ example: '2026-11-30' }) to: string;
  @ApiProperty({ enum: ['day', 'week'] }) bucket: string;
  @ApiProperty({
    example: 'submission_day_utc',
    description: 'Figures of a period belong to the failed transactions submitted in it (UTC days)',
  })
  cohort: string;
  @ApiProperty({ type: [CurrencyAnalyticsDto] }) currencies: CurrencyAnalyticsDto[];
  @ApiPropertyOptional({ type: [String] }) notes?: string[];
}
