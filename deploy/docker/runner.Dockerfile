# clawguard-runner from its static binary (CGO_ENABLED=0, `make build`).
# Nothing is pulled: FROM scratch. Build context is the bin/ directory:
#   docker build -f deploy/docker/runner.Dockerfile -t clawguard-runner bin/
#
# The runner talks to the host's Docker daemon through the mounted socket, so
# it runs as root by default; to drop that, run it with --user 65532 and
# --group-add <gid of /var/run/docker.sock>. Its --data-dir must be
# bind-mounted at the same path on the host: agent containers mount session
# directories and the gateway socket from there, and the daemon resolves those
# paths on the host.
FROM scratch
LABEL org.opencontainers.image.title="clawguard-runner" \
      org.opencontainers.image.description="Clawguard runner: spawns agent containers and asks the guard before every privileged action" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY clawguard-runner /clawguard-runner
# What the runner puts in every agent image it builds (--agent-tools-dir
# defaults to its own directory): the container's first process, with the
# agent's way out, and the agent's MCP server.
COPY clawguard-init clawguard-mcp /
# /metrics (--metrics-listen).
EXPOSE 9465
ENTRYPOINT ["/clawguard-runner"]
