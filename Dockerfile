# attest: the HTTP API and its operator CLI in one image.
#   docker build -t attest .
#   docker run -p 8080:8080 -e DATABASE_URL=postgres://attest@db/attest attest
#   docker run --rm -e DATABASE_URL=... attest keys create --name "mobile banking"
FROM node:24-bookworm-slim AS build
WORKDIR /app
# python3/make/g++ only in case a native module has no prebuilt binary for this platform
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY drizzle ./drizzle
COPY bin ./bin
RUN npm ci && npm prune --omit=dev

FROM node:24-bookworm-slim
ENV NODE_ENV=production ATTEST_DATA_DIR=/data PORT=8080 HOST=0.0.0.0
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/drizzle ./drizzle
COPY --from=build /app/bin ./bin
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME /data
EXPOSE 8080
# Liveness, not readiness: GET /healthz answers 200 while the process serves HTTP, so "unhealthy"
# means restart it. GET /readyz (database reachable, migrations applied; else 503) is readiness:
# route traffic by it (Kubernetes readinessProbe, load balancer checks), never restart on it, as a
# database outage would otherwise restart every instance at once. See docs/staff-tools.md.
HEALTHCHECK --interval=30s --timeout=3s --start-period=20s CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
ENTRYPOINT ["node", "/app/bin/attest.js"]
CMD ["serve"]
