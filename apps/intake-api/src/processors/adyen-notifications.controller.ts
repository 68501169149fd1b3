import { Body, Controller, HttpCode, Post, Res } from '@nestjs/common';
import { ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { ErrorDto } from '@retain/api-contract';
import type { FastifyReply } from 'fastify';
import { AdyenNotificationsService } from './adyen-notifications.service';

/**
 * POST /v1/retain/processors/adyen/notifications: Adyen's standard webhooks (an extension of the
 * interface, not a merchant API). No merchant credentials: each item is authenticated by its HMAC
 * signature under the `hmac_key` of the merchant's Adyen account (decisions §13 config file).
 */
@ApiTags('processors')
@Controller('retain/processors/adyen')
export class AdyenNotificationsController {
  constructor(private readonly notifications: AdyenNotificationsService) {}

  @Post('notifications')
  @HttpCode(200)
  @ApiOperation({
    summary:
      'Adyen standard webhooks (notifications). Every item must carry a valid additionalData.hmacSignature ' +
      "under the hmac_key of an Adyen account with the item's merchantAccountCode; answers [accepted] once stored",
  })
  @ApiResponse({ status: 200, description: '[accepted] (text/plain): the items are stored' })
  @ApiResponse({ status: 400, type: ErrorDto, description: 'Not an Adyen notification body (RET400)' })
  @ApiResponse({ status: 401, type: ErrorDto, description: 'An item whose HMAC signature is not valid (RET401)' })
  async receive(@Body() body: unknown, @Res({ passthrough: true }) reply: FastifyReply): Promise<string> {
    await this.notifications.receive(body);
    void reply.type('text/plain; charset=utf-8');
    return '[accepted]';
  }
}
