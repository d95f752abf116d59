#!/usr/bin/env bash
# Renders charts/fitledger with tests/charts/render (a stand-in for `helm
# template`, Helm is not packaged for Debian) for the default values and several
# value sets, and checks the rendered objects, the KubeSchedulerConfiguration,
# config/kube-scheduler/ and the Dockerfile with tests/charts/check; runs the
# built fitledger-server / fitledger-shim on the rendered configurations.
#
# Offline: Go and its libraries come from Debian (GOPATH mode over
# /usr/share/gocode, GOPROXY=off). Installs the packages with apt only if missing.
# Prints one line per check and ends with "N passed, M failed"; exits non-zero on
# any failure.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

packages=(golang-1.19-go golang-github-masterminds-sprig-dev golang-k8s-sigs-yaml-dev
  golang-github-xeipuuv-gojsonschema-dev golang-gopkg-yaml.v2-dev)
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
  echo "tests/charts: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

go=/usr/lib/go-1.19/bin/go
work="$(mktemp -d "${TMPDIR:-/tmp}/fitledger-charts.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# GOPATH mode resolves sprig's /v3 import path only for code inside a GOPATH
# with a go.mod, so the two programs are copied into a throwaway GOPATH.
mkdir -p "$work/gopath/src/fitledger.test/charts"
cp -r "$here/render" "$here/check" "$work/gopath/src/fitledger.test/charts/"
export GO111MODULE=off GOFLAGS= GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=0
export GOPATH="$work/gopath:/usr/share/gocode"
export GOCACHE="${FITLEDGER_GOCACHE:-${XDG_CACHE_HOME:-${HOME:-$work}/.cache}/fitledger-charts-go}"
for prog in render check; do
  (cd "$work/gopath/src/fitledger.test/charts/$prog" && "$go" build -o "$work/bin/$prog" .)
done

# The rendered configurations are also loaded by the built binaries, when they
# exist (FITLEDGER_SERVER_BIN / FITLEDGER_SHIM_BIN override the paths; empty
# skips; FITLEDGER_REQUIRE_BINARIES=1, set by ctest, makes a missing binary a
# failure); nothing is built here.
server_bin="${FITLEDGER_SERVER_BIN-$repo/build/server/fitledger-server}"
shim_bin="${FITLEDGER_SHIM_BIN-$repo/build/client/shim/fitledger-shim}"
"$work/bin/check" --render "$work/bin/render" --repo "$repo" --values "$here/values" \
  --server-bin "$server_bin" --shim-bin "$shim_bin" \
  ${FITLEDGER_REQUIRE_BINARIES:+--require-binaries}
