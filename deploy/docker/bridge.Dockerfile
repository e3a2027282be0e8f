# A chat bridge (clawguard-telegram or clawguard-slack) from its static binary
# (CGO_ENABLED=0, `make build`). Nothing is pulled: FROM scratch. Build
# context is the bin/ directory, the bridge named by BRIDGE:
#   docker build -f deploy/docker/bridge.Dockerfile --build-arg BRIDGE=clawguard-telegram -t clawguard-telegram bin/
# Its --data-dir (the state file: cards and clicks across restarts) must be
# a writable volume; its token comes from a mounted file (--token-file).
FROM scratch
ARG BRIDGE=clawguard-telegram
COPY ${BRIDGE} /bridge
LABEL org.opencontainers.image.title="${BRIDGE}" \
      org.opencontainers.image.description="Clawguard chat bridge: approval cards, unknown senders and agent replies in chat" \
      org.opencontainers.image.licenses="Apache-2.0"
USER 65532:65532
# /healthz, /readyz and /metrics on --http-listen (each bridge has its own default).
ENTRYPOINT ["/bridge"]
