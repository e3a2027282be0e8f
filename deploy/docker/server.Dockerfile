# clawguard-server from its static binary (CGO_ENABLED=0, `make build`).
# Nothing is pulled: FROM scratch. Build context is the bin/ directory:
#   docker build -f deploy/docker/server.Dockerfile -t clawguard-server bin/
FROM scratch
LABEL org.opencontainers.image.title="clawguard-server" \
      org.opencontainers.image.description="Clawguard control plane: Guard, Approvals and Registry over gRPC" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY clawguard-server /clawguard-server
# No /etc/passwd in scratch: a numeric non-root user.
USER 65532:65532
# gRPC (Guard, Approvals, Registry, health, reflection) and /metrics.
EXPOSE 7443 9464
ENTRYPOINT ["/clawguard-server"]
CMD ["serve", "--listen", "0.0.0.0:7443", "--metrics-listen", "0.0.0.0:9464"]
