# SPDX-License-Identifier: MIT
# Dockerfile - the gw container image (localhost/gw:latest): gwd as PID 1, gwctl and
# gwbench beside it. `make image` builds it; `make image-test` runs it for real.
# Two stages on Debian bookworm-slim: `build` has the -dev packages the Makefile needs
# (tools/deps.sh) and compiles; the runtime stage has only the shared libraries the three
# binaries link (found with ldd; tools/image-test.sh checks none is missing), CA
# certificates for https upstreams, and a non-root user. Run it as a team relay:
# docs/deploy.md (config mounted at /etc/gw/gw.yaml, secrets from the environment, the
# store on a volume at /var/lib/gw).
# No registry is needed: tools/image-base.sh makes debian:bookworm-slim locally.
# Build with `--format docker` (podman/buildah), else the HEALTHCHECK is dropped.

FROM debian:bookworm-slim AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential pkg-config libevent-dev libnghttp2-dev libssl-dev libjansson-dev \
      libcyaml-dev libyaml-dev liblmdb-dev libck-dev libhttp-parser-dev \
      zlib1g-dev libbrotli-dev libzstd-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The debug info stays in the build stage: the runtime gets stripped binaries.
RUN make -j2 O=build/image all \
 && mkdir -p /out \
 && install -s -m 0755 build/image/bin/gwd build/image/bin/gwctl build/image/bin/gwbench /out/

FROM debian:bookworm-slim
# The libraries `ldd` lists for gwd, gwctl and gwbench (Debian package names), and
# ca-certificates so https:// upstreams verify. apt-get clean: the local base (unlike
# Docker Hub's) has no docker-clean hook, and the .debs and caches would be ~80 MB.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libevent-2.1-7 libevent-core-2.1-7 libevent-openssl-2.1-7 libevent-pthreads-2.1-7 \
      libssl3 libjansson4 libcyaml1 libyaml-0-2 liblmdb0 libck0 libhttp-parser2.9 \
      zlib1g libbrotli1 libzstd1 ca-certificates \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --home-dir /var/lib/gw --no-create-home \
      --shell /usr/sbin/nologin gw \
 && mkdir -p /etc/gw /var/lib/gw \
 && chown gw:gw /var/lib/gw
COPY --from=build /out/ /usr/local/bin/
# The price table next to the config, where gwd looks by default (`prices:` in the config).
COPY etc/prices.yaml /etc/gw/prices.yaml
# The store (LMDB: request rows, usage totals, cooldowns). A named volume mounted here
# starts owned by gw, as this folder is.
VOLUME /var/lib/gw
WORKDIR /var/lib/gw
USER gw
# 8080 data plane (server.listen), 8081 control API, /healthz and /metrics (control.listen).
# The config must listen on 0.0.0.0 for published ports to reach them.
EXPOSE 8080 8081
# gwctl health: GET /healthz on $GW_CONTROL_URL (default http://127.0.0.1:8081), no token.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 CMD ["gwctl", "health"]
# gwd drains on SIGTERM (server.drain_secs, default 30 s), flushes the store and exits 0;
# give `stop` a timeout longer than drain_secs (podman stop -t 35).
STOPSIGNAL SIGTERM
ENTRYPOINT ["gwd"]
CMD ["-c", "/etc/gw/gw.yaml"]
