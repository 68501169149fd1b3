import type { FastifyInstance } from 'fastify';

/** Every page the service serves: fetches to itself only; no plugins, <base>, foreign form posts or framing. */
const PAGE_LIMITS = [
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
];

/**
 * The portal's Content-Security-Policy: scripts, styles, images and fetches from the service's own
 * origin only; no inline script, no eval, no plugins, no framing, no <base> or form redirection.
 * (Preact and chart.js set styles through the CSSOM, which style-src does not restrict.)
 */
export const PORTAL_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  ...PAGE_LIMITS,
].join('; ');

/**
 * Swagger UI at /docs: same origin as the portal, so its session cookie (Path=/) goes with any request
 * a script there makes. Its scripts are files from the service (swagger-ui-dist), never inline; its page
 * has inline <style> blocks and style attributes; it fetches only the service's own OpenAPI document.
 */
export const DOCS_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  ...PAGE_LIMITS,
].join('; ');

/** API answers are data, never a page: nothing may load from them or frame them. */
export const API_CSP = "default-src 'none'; frame-ancestors 'none'";

/**
 * Security headers on every answer of intake-api (set only where a route has not set its own):
 * a CSP (the portal's under /portal/, Swagger UI's under /docs, a closed one for the API), no MIME
 * sniffing, no framing, no referrer, same-origin isolation, HSTS in
 * production, and `Cache-Control: no-store` for API answers (merchant data, one-time keys) while
 * /portal/ assets keep the long cache headers their route sets.
 */
export function addSecurityHeaders(fastify: FastifyInstance, production: boolean): void {
  fastify.addHook('onSend', (req, reply, payload, done) => {
    const path = (req.raw.url ?? '/').split('?')[0] ?? '/';
    const setDefault = (name: string, value: string): void => {
      if (!reply.hasHeader(name)) void reply.header(name, value);
    };
    setDefault('X-Content-Type-Options', 'nosniff');
    setDefault('X-Frame-Options', 'DENY');
    setDefault('Referrer-Policy', 'no-referrer');
    setDefault('Cross-Origin-Opener-Policy', 'same-origin');
    setDefault('Cross-Origin-Resource-Policy', 'same-origin');
    if (production) setDefault('Strict-Transport-Security', 'max-age=31536000; includeSubDomains');
    const portal = path === '/portal' || path.startsWith('/portal/');
    const docs = path === '/docs' || path.startsWith('/docs/');
    if (portal) setDefault('Content-Security-Policy', PORTAL_CSP);
    else if (docs) setDefault('Content-Security-Policy', DOCS_CSP);
    else {
      setDefault('Content-Security-Policy', API_CSP);
      setDefault('Cache-Control', 'no-store');
    }
    done(null, payload);
  });
}
