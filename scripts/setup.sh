#!/usr/bin/env bash
# All set-up on a fresh Debian machine: venv at .venv with the project, a Docker
# engine that answers, and the sandbox image. Safe to run again (it skips what is done).
# --no-docker: the venv and Chromium only (scripts/test.sh --fast: no engine, no image build).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
if ! "$PY" -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null; then
  echo "setup: need Python >= 3.11 as '$PY' (set PYTHON=...)" >&2; exit 1
fi
if [[ ! -x .venv/bin/python ]]; then
  if ! "$PY" -m venv .venv 2>/dev/null; then
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
      rm -rf .venv && "$PY" -m venv .venv
    else
      echo "setup: '$PY -m venv' failed; install your distribution's python3-venv" >&2; exit 1
    fi
  fi
fi
# The project and its dependencies: uv installs the set pip would (pip's own configuration handed over:
# its certificate, constraints, wheel folders and indexes, every index weighed as pip does) in about a
# quarter of pip's time (16 s against 68 s here); pip itself is the fallback.
install_project() {
  if .venv/bin/pip install -q --disable-pip-version-check uv >/dev/null 2>&1; then
    local -A given=()
    local line key value
    while IFS= read -r line; do  # `pip config list`: the environment's values first, then the files'
      key="${line%%=*}"; key="${key##*.}"; value="${line#*=}"; value="${value#\'}"; value="${value%\'}"
      [[ -n "${given[$key]:-}" ]] || given[$key]="$value"
    done < <(.venv/bin/pip config list 2>/dev/null)
    local -a env=(UV_INDEX_STRATEGY=unsafe-best-match)
    [[ -n "${given[cert]:-}" ]] && env+=("SSL_CERT_FILE=${given[cert]}")
    [[ -n "${given[constraint]:-}" ]] && env+=("UV_CONSTRAINT=${given[constraint]}")
    [[ -n "${given[find-links]:-}" ]] && env+=("UV_FIND_LINKS=${given[find-links]// /,}")
    [[ -n "${given[index-url]:-}" ]] && env+=("UV_INDEX_URL=${given[index-url]}")
    [[ -n "${given[extra-index-url]:-}" ]] && env+=("UV_EXTRA_INDEX_URL=${given[extra-index-url]}")
    if env "${env[@]}" .venv/bin/uv pip install -q --python .venv/bin/python --compile-bytecode -e '.[dev]'; then
      return
    fi
    echo "setup: uv could not install the project; pip will" >&2
  fi
  .venv/bin/pip install -q --disable-pip-version-check -e '.[dev]'
}
stamp=".venv/.installed-$(sha256sum pyproject.toml | cut -c1-12)"
if [[ ! -f "$stamp" ]]; then
  install_project
  touch "$stamp"
fi
# Bytecode for the project's own modules: an editable install compiles none, and with
# PYTHONDONTWRITEBYTECODE set (as on these machines) every harness process would compile them
# again (~0.07 s of CPU each); the tests' helpers and fakes too, which the suite's subprocesses import
# (a fake server, an agent module). Up-to-date files are skipped.
.venv/bin/python -m compileall -q harness bench tests >/dev/null
# Debian's Chromium on the host: the report and viewer tests drive the pages in it with
# Playwright (executable_path=/usr/bin/chromium; `playwright install` cannot download here).
if [[ ! -x /usr/bin/chromium ]]; then
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "setup: /usr/bin/chromium is missing; install Debian's chromium package (as root)" >&2
  fi
fi
if [[ "${1:-}" == "--no-docker" ]]; then
  exit 0
fi
# Debian's docker-compose (1.29): the local docker-compose session (scripts/compose.sh) and
# tests/test_compose.py. Without recommends: the engine is ensure-docker.sh's business.
if ! command -v docker-compose >/dev/null; then
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      docker-compose >/dev/null
  else
    echo "setup: docker-compose is missing; install Debian's docker-compose package (as root)" >&2
  fi
fi
bash scripts/ensure-docker.sh
.venv/bin/harness images build
