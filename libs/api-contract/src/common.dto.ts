import { ApiProperty } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { IsArray, IsInt, IsString, MaxLength, Min, ValidateNested } from 'class-validator';
import { MERCHANT_ID_MAX_LENGTH } from './transaction-fields.table';

/** Error body of the spec: `{code, message}`; also one entry of `rejected[].errors`. */
export class ErrorDto {
  @ApiProperty({ example: 'RET400' })
  @IsString()
  code: string;

  @ApiProperty({ example: 'Invalid parameter: transactions' })
  @IsString()
  message: string;
}

/** One rejected transaction or refund: its merchant id and every error found. */
export class RejectedItemDto {
  @ApiProperty({ maxLength: MERCHANT_ID_MAX_LENGTH, description: 'Merchant identifier of the rejected item' })
  @IsString()
  @MaxLength(MERCHANT_ID_MAX_LENGTH)
  id: string;

  @ApiProperty({ type: () => [ErrorDto] })
  @IsArray()
  @ValidateNested({ each: true })
  @Type(() => ErrorDto)
  errors: ErrorDto[];
}

/** `transaction_validation_errors`: the 207 body of a submission and the `validation failed` push content. */
export class TransactionValidationErrorsDto {
  @ApiProperty({ type: 'integer', description: 'Transactions that passed validation' })
  @IsInt()
  @Min(0)
  success_count: number;

  @ApiProperty({ type: 'integer', description: 'Transactions that failed validation' })
  @IsInt()
  @Min(0)
  error_count: number;

  @ApiProperty({ type: () => [RejectedItemDto] })
  @IsArray()
  @ValidateNested({ each: true })
  @Type(() => RejectedItemDto)
  rejected: RejectedItemDto[];
}

/** Fields shared by the List envelopes (decisions §5). */
export abstract class ListEnvelopeBaseDto {
  @ApiProperty({ enum: ['List'], example: 'List' })
  object: 'List';

  @ApiProperty({ description: 'Query string of the request', example: '?limit=100' })
  url: string;

  @ApiProperty({
    type: String,
    nullable: true,
    description: 'Partial route to the next page (starting_after = id of the last item); null at the end',
  })
  next: string | null;

  @ApiProperty({
    type: String,
    nullable: true,
    description: 'Partial route to the previous page (ending_before = id of the first item); null at the start',
  })
  previous: string | null;

  @ApiProperty({ type: 'integer', description: 'Number of items in data' })
  total_count: number;
}
