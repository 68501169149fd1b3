import fastifyStatic from '@fastify/static';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { existsSync } from 'node:fs';
import path from 'node:path';

/**
 * The bundle `npm run build` writes (apps/portal, Vite): dist/portal next to dist/apps. Found from this
 * module's compiled place (dist/apps/intake-api/src/http) or from the app's bundled entry, where every
 * module's __dirname is the entry's (dist/apps/intake-api/src: tools/build.mjs).
 */
export const PORTAL_DIR =
  [path.resolve(__dirname, '../../../../portal'), path.resolve(__dirname, '../../../portal')].find((dir) =>
    existsSync(path.join(dir, 'index.html')),
  ) ?? path.resolve(__dirname, '../../../../portal');

/**
 * Serves the merchant portal at /portal/ (decisions §14): index.html never cached (it names the
 * current bundle), the hashed assets cached for a year, immutable. The portal's CSP (no inline
 * script) is set by addSecurityHeaders. Without a built bundle, /portal/ is simply not found.
 */
export async function servePortal(app: NestFastifyApplication, dir = PORTAL_DIR): Promise<boolean> {
  if (!existsSync(path.join(dir, 'index.html'))) return false;
  const fastify = app.getHttpAdapter().getInstance();
  await fastify.register(fastifyStatic, {
    root: dir,
    prefix: '/portal/',
    index: ['index.html'],
    redirect: true,
    wildcard: true,
    setHeaders: (res, file) => {
      void res.header(
        'Cache-Control',
        file.includes(`${path.sep}assets${path.sep}`) ? 'public, max-age=31536000, immutable' : 'no-cache',
      );
    },
  });
  return true;
}
