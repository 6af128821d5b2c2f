#!/usr/bin/env bash
# docker-compose for the local session (docker-compose.yml), with the variables it reads filled
# in from this machine; every argument goes to docker-compose. Examples:
#   bash scripts/compose.sh build
#   bash scripts/compose.sh run --rm harness run --dataset datasets/gaia-smoke --model replay \
#     --website datasets/gaia-smoke/website --output-dir runs/smoke
# What it sets (an exported value wins):
#   HOST_UID/HOST_GID   the caller's ids: files under runs/ belong to the caller
#   DOCKER_GID          the group of the engine's socket (the service's user joins it)
#   HARNESS_BASE_IMAGE  debian:bookworm-slim when present or pullable; on a machine without a
#                       registry, the offline base `harness images build` makes (harness-base:<hash>)
#   .harness/compose-build-ca.crt  the CA bundle pip needs during the build (HARNESS_BUILD_CA_BUNDLE,
#                       PIP_CERT, REQUESTS_CA_BUNDLE, SSL_CERT_FILE, else the system bundle); only
#                       the image's build stage sees it
#   PIP_INDEX_URL/PIP_EXTRA_INDEX_URL  from pip's configuration, when it names http(s) indexes
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
command -v docker-compose >/dev/null || { echo "compose.sh: docker-compose is missing (apt-get install docker-compose)" >&2; exit 2; }
SOCKET="${DOCKER_SOCKET:-/var/run/docker.sock}"
export HOST_UID="${HOST_UID:-$(id -u)}" HOST_GID="${HOST_GID:-$(id -g)}"
export DOCKER_GID="${DOCKER_GID:-$(stat -c %g "$SOCKET" 2>/dev/null || echo 0)}"

base="${HARNESS_BASE_IMAGE:-debian:bookworm-slim}"
if ! docker image inspect "$base" >/dev/null 2>&1 && ! docker pull -q "$base" >/dev/null 2>&1; then
  # No registry: the offline base, built (with the sandbox image the service's runs need) by the
  # harness on the host.
  if [[ ! -x .venv/bin/harness ]]; then
    echo "compose.sh: no image $base and no registry; run scripts/setup.sh first (it builds an offline base)" >&2
    exit 2
  fi
  .venv/bin/harness images build >&2
  base="$(.venv/bin/python -c 'from harness.sandbox.docker.images import images_dir
from harness.fsutil import tree_hash
print("harness-base:" + tree_hash(images_dir() / "base"))')"
fi
export HARNESS_BASE_IMAGE="$base"

mkdir -p .harness
ca=""
for candidate in "${HARNESS_BUILD_CA_BUNDLE:-}" "${PIP_CERT:-}" "${REQUESTS_CA_BUNDLE:-}" "${SSL_CERT_FILE:-}" \
                 /etc/ssl/certs/ca-certificates.crt; do
  if [[ -n "$candidate" && -f "$candidate" ]]; then ca="$candidate"; break; fi
done
if [[ -n "$ca" ]]; then
  cmp -s "$ca" .harness/compose-build-ca.crt || cp "$ca" .harness/compose-build-ca.crt
else
  rm -f .harness/compose-build-ca.crt
fi

pip_index() {  # an http(s) index from the environment or pip's configuration (file:// ones are the host's)
  local value="${!1:-}"
  [[ -n "$value" ]] || value="$( (.venv/bin/pip config get "global.$2" || pip3 config get "global.$2") 2>/dev/null | head -n1)" || true
  local kept=""
  for url in $value; do [[ "$url" == http* ]] && kept="${kept:+$kept }$url"; done
  echo "$kept"
}
export PIP_INDEX_URL="$(pip_index PIP_INDEX_URL index-url)"
export PIP_EXTRA_INDEX_URL="$(pip_index PIP_EXTRA_INDEX_URL extra-index-url)"
exec docker-compose "$@"
