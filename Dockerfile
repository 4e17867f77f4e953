# syntax=docker/dockerfile:1
# Sluice: built with the dev toolchain, run with production dependencies only, as a non-root user.
# Node 24 (the newest LTS) on Debian 13 trixie: its glibc 2.41 loads the newest uWebSockets.js build
# (@btc-vision/uwebsockets.js, upstream v20.57.0, needs glibc >= 2.38); bookworm's 2.36 would not,
# and Node 24 has no uws-pack binary (docs/architecture.md#the-front-ends-build).
#   docker build -t sluice .
#   docker run -p 8080:8080 -v "$PWD/sluice.yaml:/etc/sluice/config.yaml:ro" sluice
# test/e2e/dockerfile.test.ts keeps this file in step with package.json and docs/operations.md, and lints it.

FROM node:24-trixie-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# No scripts yet: `prepare` would compile before the sources are here; the build step does that.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json ./
COPY src src
COPY examples examples
COPY test test
COPY bench bench
RUN npm run build

FROM node:24-trixie-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# Both uWebSockets.js builds ship a binary per platform and Node ABI (about 250 MB); only the one
# this Node loads is kept (the runtime stage runs the same Node), so the image is ~240 MB smaller.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && find node_modules -name 'uws_*.node' ! -name "uws_$(node -p 'process.platform + "_" + process.arch + "_" + process.versions.modules').node" -delete

FROM node:24-trixie-slim
# SLUICE_HOST overrides listen.host: reachable from outside the container. The port is the
# config's listen.port (default 8080); set SLUICE_PORT to override it, and the health check follows.
ENV NODE_ENV=production \
    SLUICE_HOST=0.0.0.0 \
    SLUICE_CONFIG=/etc/sluice/config.yaml
WORKDIR /app
COPY --from=deps /app/node_modules node_modules
COPY package.json ./
COPY bin bin
COPY --from=build /app/dist/src dist/src
COPY src/admin/ui src/admin/ui
COPY --from=build /app/dist/examples dist/examples
COPY examples/*.yaml examples/
USER node
EXPOSE 8080
# No curl in the slim image: Node asks /healthz (no --start-period: dockerfilelint 1.8 misreads it,
# and the gateway is up well within the first interval). SLUICE_HEALTHCHECK_URL overrides the URL (an
# `admin` listener, TLS: https is asked without verifying the certificate, on the loopback).
HEALTHCHECK --interval=10s --timeout=5s --retries=3 \
    CMD ["node", "-e", "const u=new URL(process.env.SLUICE_HEALTHCHECK_URL||'http://127.0.0.1:'+(process.env.SLUICE_PORT||8080)+'/healthz');require(u.protocol==='https:'?'node:https':'node:http').get(u,{rejectUnauthorized:false,timeout:4000},r=>process.exit(r.statusCode===200?0:1)).on('error',()=>process.exit(1)).on('timeout',()=>process.exit(1))"]
# Exec form, no shell: SIGTERM reaches Node, which drains (queued requests get 503 draining,
# streams finish until drainTimeoutMs) and exits 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "bin/sluice.js"]
CMD ["serve"]
