# syntax=docker/dockerfile:1
# The service's image: one image for every role. The role is the command:
#   docker run IMAGE                      api, worker and bot in one process
#   docker run IMAGE --role api           one role (or several: --role api,bot)
# Configuration comes from the environment at run time (docs/configuration.md); nothing secret is
# in the image. docs/operations.md says how to run it.

# Pinned by tag and digest: a rebuild gets the same Node and Debian until someone changes this line.
ARG NODE_IMAGE=node:20.19.5-bookworm-slim@sha256:9e70124bd00f47dd023e349cd587132ae61892acc0e47ed641416c3e18f401c3

# ---- build: dev dependencies, generated routes, TypeScript to dist/, the client releases ----
FROM ${NODE_IMAGE} AS build
WORKDIR /app
# The manifests alone first, so the dependency layer is reused while only sources change.
COPY package.json package-lock.json ./
COPY clients/sdk/package.json clients/sdk/
COPY clients/cli/package.json clients/cli/
COPY clients/mcp/package.json clients/mcp/
# Install scripts stay off (prepare would build the clients before their sources are here).
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json tsoa.json ./
COPY scripts ./scripts
COPY clients ./clients
COPY migrations ./migrations
COPY plugins ./plugins
COPY bot ./bot
COPY src ./src
# release builds the clients (the SDK to clients/sdk/dist among them) and packs the releases the
# service serves at /releases; then build.mjs generates the tsoa routes and compiles src, bot,
# plugins and migrations to dist/, so the running service needs neither tsx nor TypeScript. The
# clients come first: the remote MCP endpoint imports the SDK, whose types the compile reads from
# its build.
RUN npm run release && npm run build

# ---- runtime: production dependencies and dist/ only ----
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
    PORT=8080 \
    NPM_CONFIG_UPDATE_NOTIFIER=false
WORKDIR /app
COPY package.json package-lock.json ./
# npm ci needs the workspaces' manifests that the lock file names.
COPY clients/sdk/package.json clients/sdk/
COPY clients/cli/package.json clients/cli/
COPY clients/mcp/package.json clients/mcp/
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
# The api imports @gpu-rental/sdk (remote MCP's tools call the API through it): npm ci links the
# workspace, and its package.json points into this build.
COPY --from=build /app/clients/sdk/dist ./clients/sdk/dist
COPY --from=build /app/releases ./releases
COPY deploy/container/healthcheck.mjs ./deploy/container/healthcheck.mjs
# Files stay root's and read-only to the service, which writes nothing to its own directory.
USER node
EXPOSE 8080
# A process with the api role must answer /healthz (200 once the database answers and is migrated);
# a worker or bot process has no port, so being alive is all there is to check.
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
  CMD ["node", "deploy/container/healthcheck.mjs"]
# The service drains on SIGTERM and forces its exit after 30 s: give `docker stop` -t 35 or more.
STOPSIGNAL SIGTERM
# A young generation of 8 MB per semi-space instead of V8's 16 MB: an idle api process stays
# near 112 MB instead of 129, at no measured cost in throughput or CPU per admission (bench:http,
# bench:rentals; 4 MB saved more but cost about a tenth more CPU per admission). Every launch of
# the service (npm start, the systemd units) uses the same flags; test/tooling/deployment-files.test.ts
# holds them to this line.
ENTRYPOINT ["node", "--max-semi-space-size=8", "dist/src/main.js"]
CMD ["--role", "api,worker,bot"]
