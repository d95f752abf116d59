# syntax=docker/dockerfile:1
#
# The fitledger image: fitledger-server, fitledger-shim, fitledgerctl and
# fitledger-sim in /usr/local/bin, on debian:12-slim with only their runtime
# shared libraries, running as the non-root user 65532.
#
#   docker build -t fitledger:0.1.0 .
#
# The build stage is CI's build: the same scripts/install-deps and the same
# CMake configure as scripts/test's GCC suite (tests/charts/run.sh checks that
# they agree), then only the four executables, stripped.

FROM debian:12 AS build
WORKDIR /src
# The install script alone first: its layer stays cached while sources change.
COPY scripts/install-deps scripts/install-deps
RUN scripts/install-deps && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
 && cmake --build build --target fitledger-server fitledger-shim fitledgerctl fitledger-sim
# Collect the executables wherever the CMake tree puts them, stripped.
RUN mkdir -p /out \
 && for b in fitledger-server fitledger-shim fitledgerctl fitledger-sim; do \
      f="$(find build -type f -name "$b" -perm -u+x | head -n 1)"; \
      if [ -z "$f" ]; then echo "$b was not built" >&2; exit 1; fi; \
      install -m 0755 -s "$f" "/out/$b"; \
    done

FROM debian:12-slim
LABEL org.opencontainers.image.title="fitledger" \
      org.opencontainers.image.description="Kubernetes scheduler extender with a ledger of assumed pods"
RUN apt-get update \
 && apt-get install -y --no-install-recommends libgrpc++1.51 libprotobuf32 libabsl20220623 libyaml-cpp0.7 libcurl4 libcpp-httplib0.11 libsimdjson14 ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/fitledger-server /out/fitledger-shim /out/fitledgerctl /out/fitledger-sim /usr/local/bin/
# Fail the build if a binary needs a shared library the list above lacks.
RUN ! ldd /usr/local/bin/fitledger-server /usr/local/bin/fitledger-shim /usr/local/bin/fitledgerctl /usr/local/bin/fitledger-sim | grep 'not found'
RUN groupadd --gid 65532 nonroot \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin nonroot
# Numeric, so that Kubernetes' runAsNonRoot can verify it.
USER 65532:65532
CMD ["/usr/local/bin/fitledger-server", "--config", "/etc/fitledger/config/server.yaml"]
