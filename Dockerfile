# syntax=docker/dockerfile:1
# The `neardup` binary in a small image; by default it runs `neardup serve` (docs/service.md).
#
#   docker build -t neardup .
#   docker run --rm -p 127.0.0.1:8080:8080 -e NEARDUP_ES_URL=http://es-host:9200 neardup
#   docker run --rm -e NEARDUP_ES_URL=http://es-host:9200 neardup es-init --index articles
#
# docker-compose.yml runs it beside Elasticsearch. tests/it/live_es/deploy.rs runs this file's
# ENTRYPOINT, CMD, ENV and HEALTHCHECK against a live node and checks the versions below;
# scripts/container-check builds the image with podman and runs the container (CI).

# Builder: the official Rust image on Debian bookworm, the release the runtime stage uses, so
# the binary needs no newer glibc than it finds there. Rust 1.95 is the toolchain the project
# is built and tested with; Cargo.toml's rust-version (1.89) is only the minimum. The slim
# variant has gcc and libc6-dev, all that the C parts (ring, zstd) need.
FROM rust:1.95-slim-bookworm AS builder
WORKDIR /src
# The whole repository less .dockerignore: the build reads files outside src/ (crates/,
# mappings/, docs/ are compiled in), and copying everything cannot miss one.
COPY . .
# BuildKit cache mounts keep the downloaded crates and the compiled dependencies between
# builds: after a source change only neardup itself is compiled again. target/ is a cache
# mount, so the binary is copied out of it in the same step. The release profile keeps line
# tables for profiling (Cargo.toml); the image would strip them, so it does not make them
# (a shorter build; symbols stay, for backtraces). One codegen unit per crate: a smaller
# binary (the image is kept under 120 MB), for a longer compile of neardup's own crates.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    CARGO_PROFILE_RELEASE_DEBUG=0 CARGO_PROFILE_RELEASE_STRIP=debuginfo \
    CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 \
    cargo build --release --locked --bin neardup \
    && cp target/release/neardup /usr/local/bin/neardup

# Runtime: Debian's slim image, the builder's release (glibc), plus curl for the healthcheck.
# No ca-certificates: neardup's TLS (rustls) trusts the Mozilla roots compiled into the binary
# and the PEM given with --es-ca-cert / NEARDUP_ES_CA_CERT, never the system's bundle.
FROM debian:bookworm-slim
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends curl \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 neardup \
    && useradd --system --uid 10001 --gid neardup --no-create-home --shell /usr/sbin/nologin neardup
COPY --from=builder /usr/local/bin/neardup /usr/local/bin/neardup
# Not root: the service needs no privilege (8080 is not a privileged port). Numeric, so that
# Kubernetes' runAsNonRoot can check it.
USER 10001:10001
# One JSON object per log line, for the log collector reading the container's stderr.
ENV NEARDUP_LOG_FORMAT=json
EXPOSE 8080
# /healthz answers 200 while Elasticsearch answers (503 otherwise); /v1 is not asked, so a
# --token-file does not matter here. Change the port here too if CMD listens on another.
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
    CMD ["curl", "-fsS", "-o", "/dev/null", "http://127.0.0.1:8080/healthz"]
# The full path: `docker run neardup es-init …` replaces CMD and keeps the binary.
ENTRYPOINT ["/usr/local/bin/neardup"]
# All interfaces inside the container: the published port decides who reaches it. The
# cluster's URL comes from NEARDUP_ES_URL (as every command's --es does).
CMD ["serve", "--listen", "0.0.0.0:8080"]
