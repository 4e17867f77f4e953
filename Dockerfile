# syntax=docker/dockerfile:1
# Sluice: build with the dev toolchain, run with production dependencies only, as a non-root user.
# uWebSockets.js (uws-pack) ships prebuilt binaries for glibc Linux x64, so the image is Debian-based.

FROM node:22-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json ./
COPY src src
COPY examples examples
COPY test test
COPY bench bench
RUN npx tsc -p tsconfig.json

FROM node:22-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund

FROM node:22-bookworm-slim
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
# The gateway drains on SIGTERM (queued requests get 503 draining, streams finish until drainTimeoutMs).
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "bin/sluice.js"]
CMD ["serve"]
