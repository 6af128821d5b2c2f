#!/usr/bin/env bash
# README command 2: set everything up, then run the whole test suite (real Docker engine).
#   bash scripts/test.sh                 set-up, static checks, the default suite, no container left
#   bash scripts/test.sh --fast          the quick loop: no engine, image or static checks; the tests
#                                        not marked docker only (docs/testing.md)
#   bash scripts/test.sh [--fast] ARGS   ARGS go to pytest: a file, -k WORDS, -m MARKERS, -n WORKERS
# The suite runs on HARNESS_TEST_WORKERS pytest-xdist workers (default 4: most tests wait on Docker,
# not on the 2 cores; 4 took 885 s where 3 took 1,082 s from a fresh clone here);
# tests/conftest.py keeps the ones that must not overlap in serial groups.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
fast=0
if [[ "${1:-}" == "--fast" ]]; then
  fast=1
  shift
fi
workers="${HARNESS_TEST_WORKERS:-4}"
if (( fast )); then
  bash scripts/setup.sh --no-docker
  exec .venv/bin/pytest -q -n "${HARNESS_TEST_WORKERS:-2}" -m "not docker and not slow" "$@"
fi
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
# While the static checks run (one core, mostly mypy), one collection writes pytest's rewritten test modules
# to __pycache__ (PYTHONDONTWRITEBYTECODE, set on these machines, stops that in the suite's own run): each
# worker's collection then reads them, ~8 s of CPU instead of ~13.
PYTHONDONTWRITEBYTECODE= .venv/bin/pytest --collect-only -q -p no:cacheprovider >/dev/null 2>&1 &
collected=$!
bash scripts/check.sh
wait "$collected" || true  # a collection error shows in the run below
.venv/bin/pytest -q -n "$workers" "$@"
# The suite must leave no harness container behind (one whose owner still runs is another suite's or
# run's on this machine, not ours: tests/helpers/leftovers.py).
if ! left="$(.venv/bin/python -m tests.helpers.leftovers)"; then
  echo "test.sh: harness container(s) left after the tests:" >&2
  echo "$left" >&2
  exit 1
fi
