#!/bin/sh
# Runs the app named by APP from the build output; exec so SIGTERM reaches Node directly.
set -eu
case "${APP}" in
  migrate) exec node --enable-source-maps dist/libs/db/src/migrate.cli.js ;;
  cli) exec node --enable-source-maps dist/apps/cli/src/main.js "$@" ;;
  intake-api|submission-validator|retry-worker|refund-batcher|webhook-dispatcher)
    exec node --enable-source-maps "dist/apps/${APP}/src/main.js" ;;
  *) echo "unknown APP '${APP}'" >&2; exit 64 ;;
esac
