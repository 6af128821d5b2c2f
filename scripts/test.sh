#!/usr/bin/env bash
# README command 2: set everything up, then run the whole test suite (real Docker engine).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
# The remote-engine and swarm tests start a second dockerd in a network namespace (ip) with TLS
# certificates of their own (openssl): tests/helpers/engines.py.
if ! command -v ip >/dev/null || ! command -v openssl >/dev/null; then
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 openssl >/dev/null
  else
    echo "test.sh: the second-engine tests need iproute2 and openssl (install them as root)" >&2
  fi
fi
# The static checks first (ruff, mypy, import-linter; configured in pyproject.toml): a finding fails the run.
bash scripts/check.sh
.venv/bin/pytest -q "$@"
# The suite must leave no harness container behind.
left="$(docker ps -aq --filter label=harness.managed=1 | wc -l)"
if [[ "$left" != 0 ]]; then
  echo "test.sh: $left harness container(s) left after the tests:" >&2
  docker ps -a --filter label=harness.managed=1 >&2
  exit 1
fi
