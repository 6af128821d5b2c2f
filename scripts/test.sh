#!/usr/bin/env bash
# README command 2: set everything up, then run the whole test suite (real Docker engine).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
.venv/bin/pytest -q "$@"
# The suite must leave no harness container behind.
left="$(docker ps -aq --filter label=harness.managed=1 | wc -l)"
if [[ "$left" != 0 ]]; then
  echo "test.sh: $left harness container(s) left after the tests:" >&2
  docker ps -a --filter label=harness.managed=1 >&2
  exit 1
fi
