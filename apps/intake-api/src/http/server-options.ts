import { newRequestId } from '@retain/domain';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';

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
};

export function configureIntake(app: NestFastifyApplication): void {
  const fastify = app.getHttpAdapter().getInstance();
  fastify.addHook('onSend', (req, reply, payload, done) => {
    void reply.header('X-Request-Id', req.id);
    done(null, payload);
  });
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
      .build(),
  );
  SwaggerModule.setup('docs', app, document, { jsonDocumentUrl: 'openapi.json', raw: ['json'] });
}
