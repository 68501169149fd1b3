import { ApiProperty } from '@nestjs/swagger';
import { RefundStatus } from '@retain/domain';
import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  ArrayMinSize,
  IsArray,
  IsDefined,
  IsInt,
  IsNotEmpty,
  IsNumber,
  IsOptional,
  IsPositive,
  IsString,
  MaxLength,
  ValidateNested,
} from 'class-validator';
import { ListEnvelopeBaseDto, RejectedItemDto } from './common.dto';
import { ReadOnlyField } from './contract-field.decorator';
import { MAX_REFUNDS_PER_CALL, MERCHANT_ID_MAX_LENGTH } from './transaction-fields.table';

/** A Refund as responses show it; `id` is the refunded transaction's merchant `id`. */
export class RefundDto {
  @ApiProperty({ maxLength: MERCHANT_ID_MAX_LENGTH, description: 'Merchant identifier of the transaction' })
  id: string;

  @ReadOnlyField({ maxLength: 40, description: 'Service-generated identifier' })
  vid: string;

  @ApiProperty({ type: 'number', description: 'Amount of the refund', example: 19.99 })
  amount: number;

  @ReadOnlyField({ enum: Object.values(RefundStatus) })
  status: RefundStatus;

  @ReadOnlyField({ format: 'date-time', description: 'Date and time of the refund' })
  timestamp: string;
}

/** One item of `POST /retain/refunds`. */
export class RefundRequestItemDto {
  @ApiProperty({
    required: true,
    minLength: 1,
    maxLength: MERCHANT_ID_MAX_LENGTH,
    description: 'Transaction to refund or stop',
  })
  @IsDefined()
  @IsString()
  @IsNotEmpty()
  @MaxLength(MERCHANT_ID_MAX_LENGTH)
  id: string;

  @ApiProperty({
    required: false,
    type: 'number',
    minimum: 0,
    exclusiveMinimum: true,
    description: "Partial refund; default all that is refundable. At most the currency's decimals.",
  })
  @IsOptional()
  @IsNumber({ allowNaN: false, allowInfinity: false })
  @IsPositive()
  amount?: number;
}

export class SubmitRefundsBodyDto {
  @ApiProperty({ type: () => [RefundRequestItemDto], minItems: 1, maxItems: MAX_REFUNDS_PER_CALL })
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(MAX_REFUNDS_PER_CALL)
  @ValidateNested({ each: true })
  @Type(() => RefundRequestItemDto)
  refunds: RefundRequestItemDto[];
}

/** 200: `{message}`; 207 adds `error_count` and `rejected` (decisions §8). */
export class SubmitRefundsResponseDto {
  @ApiProperty({ example: '3 refunds received for processing' })
  message: string;

  @ApiProperty({ required: false, type: 'integer' })
  @IsOptional()
  @IsInt()
  error_count?: number;

  @ApiProperty({ required: false, type: () => [RejectedItemDto] })
  @IsOptional()
  rejected?: RejectedItemDto[];
}

/** List envelope of `GET /retain/refunds` and `GET /retain/refunds/{id}`. */
export class RefundListEnvelopeDto extends ListEnvelopeBaseDto {
  @ApiProperty({ type: () => [RefundDto] })
  data: RefundDto[];
}
