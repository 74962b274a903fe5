# attest: the HTTP API and its operator CLI in one image, on its embedded database by default.
#   docker build -t attest .
#   docker run -p 8080:8080 -v attest-data:/data attest                 # embedded database in /data
#   docker run -p 8080:8080 -e DATABASE_URL=postgres://attest@db/attest attest
#   docker run --rm -e DATABASE_URL=... attest keys create --name "mobile banking"
# .ci/run builds it where a Docker engine runs, and replays its build stage where none does
# (test/install/replayDockerfile.mjs), so a Dockerfile that cannot build fails CI.
FROM node:24-bookworm-slim AS build
WORKDIR /app
# python3/make/g++ only in case a native module has no prebuilt binary for this platform
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
# the workspace's manifest (npm ci installs workspaces) and what `npm run build` compiles of it
COPY packages/client/package.json packages/client/tsconfig.json ./packages/client/
COPY src ./src
COPY drizzle ./drizzle
COPY bin ./bin
# build with the dev dependencies (TypeScript, the API page's assets), then drop them; the
# workspace's link goes too, since the final stage has no packages/
RUN npm ci && npm run build && npm prune --omit=dev && rm -f node_modules/attest-client

FROM node:24-bookworm-slim
ENV NODE_ENV=production ATTEST_DATA_DIR=/data PORT=8080 HOST=0.0.0.0
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/drizzle ./drizzle
COPY --from=build /app/bin ./bin
# the embedded database's data dir: the node user's, private (attest refuses one others can write)
RUN mkdir -p /data && chown node:node /data && chmod 700 /data
# not root: the embedded PostgreSQL runs as the node user, its socket in a private folder in /tmp
USER node
VOLUME /data
EXPOSE 8080
# Liveness, not readiness: GET /healthz answers 200 while the process serves HTTP, so "unhealthy"
# means restart it. GET /readyz (database reachable, migrations applied; else 503) is readiness:
# route traffic by it (Kubernetes readinessProbe, load balancer checks), never restart on it, as a
# database outage would otherwise restart every instance at once. An embedded database that dies
# is started again by attest; one that does not come back within 30 s ends the process (exit 3),
# for the restart policy to act on. See docs/operations.md.
HEALTHCHECK --interval=30s --timeout=3s --start-period=20s CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
ENTRYPOINT ["node", "/app/bin/attest.js"]
CMD ["serve"]
