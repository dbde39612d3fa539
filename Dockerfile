# syntax=docker/dockerfile:1
#
# Coffer container image (README "Deploy"). Three stages: production dependencies (with the
# native add-ons built), the TypeScript build, and a slim runtime that has neither compilers
# nor dev dependencies and runs as an unprivileged user.
#
# Node 22: the newest line every dependency declares (better-sqlite3 12: 20.x-26.x; package.json:
# >=20.19) whose LTS still gets security fixes; Node 20 reached end of life in April 2026.
# Debian (glibc), not Alpine: better-sqlite3 and @node-rs/argon2 ship prebuilt binaries for it.
ARG NODE_VERSION=22

# --- production node_modules ---------------------------------------------------------------
FROM node:${NODE_VERSION}-bookworm-slim AS deps
# Only used when better-sqlite3-multiple-ciphers has no prebuilt binary for this platform
# (node-gyp fallback).
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: no dependency runs code at install, and our `prepare` (tsc) is skipped
# (no sources here, no TypeScript in a production install). better-sqlite3-multiple-ciphers (the
# encrypted SQLite every connection uses) is the one package whose install script is needed
# (package.json "allowScripts"): it fetches or builds its binary. Plain better-sqlite3 is loaded
# by no code of the server (the tests read files with it), so its binary is not built.
RUN npm ci --omit=dev --ignore-scripts \
 && npm rebuild better-sqlite3-multiple-ciphers \
 && npm cache clean --force

# --- build: dist/ from src/, and the console's build dist/console from console/ ------------
FROM node:${NODE_VERSION}-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY console ./console
RUN npm run build

# --- runtime -------------------------------------------------------------------------------
FROM node:${NODE_VERSION}-bookworm-slim AS runtime
ENV NODE_ENV=production \
    COFFER_HOST=0.0.0.0 \
    COFFER_PORT=8080 \
    COFFER_CONSENT_PORT=8081 \
    COFFER_DATA_DIR=/data
# A fixed numeric uid/gid, so orchestrators can check runAsNonRoot and volumes can be chowned.
RUN groupadd --system --gid 10001 coffer \
 && useradd --system --uid 10001 --gid coffer --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin coffer \
 && mkdir -p /data \
 && chown coffer:coffer /data \
 && chmod 0700 /data
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
USER 10001:10001
# SQLite database, filesystem BLOBs, generated keys, bootstrap credentials (see COFFER_DATA_DIR).
VOLUME ["/data"]
EXPOSE 8080 8081
# Readiness of this node (database, migrations, BLOB store), without curl in the image: node's
# own http(s) module. The consent listener answers /readyz too, for a node that serves only that
# one. A listener with native TLS is probed over HTTPS; its certificate names the public host,
# not 127.0.0.1, so this local probe does not verify it (it asks for readiness, sends nothing).
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "-e", "const e=process.env,c=e.COFFER_SERVE==='consent',p=c?e.COFFER_CONSENT_PORT:e.COFFER_PORT,s=(c?e.COFFER_CONSENT_TLS_CERT_FILE||e.COFFER_TLS_CERT_FILE:e.COFFER_TLS_CERT_FILE)?'https':'http';require(s).get(`${s}://127.0.0.1:${p}/readyz`,{rejectUnauthorized:false,timeout:4000},r=>process.exit(r.statusCode===200?0:1)).on('timeout',()=>process.exit(1)).on('error',()=>process.exit(1))"]
# Graceful shutdown: /readyz turns 503, COFFER_SHUTDOWN_DELAY_MS, then COFFER_SHUTDOWN_GRACE_MS.
# Give the container a stop timeout longer than both together (plus 5 s).
STOPSIGNAL SIGTERM
# node itself is PID 1 and receives the signal (no npm wrapper, which would not forward it).
ENTRYPOINT ["node", "dist/coffer.js"]
CMD ["serve"]
