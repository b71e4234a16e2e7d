# Tollgate gateway / projector image. The same image runs `serve` (default) or `projector`.
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY bin ./bin
COPY src ./src
COPY projections ./projections
COPY schemas ./schemas
COPY config ./config
COPY setup ./setup
COPY web ./web
USER node
EXPOSE 8787
HEALTHCHECK --interval=10s --timeout=3s --retries=3 CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||8787)+'/healthz').then(r=>process.exit(r.ok?0:1)).catch(()=>process.exit(1))"
ENTRYPOINT ["node", "bin/tollgate.js"]
CMD ["serve"]
