#!/usr/bin/env bash
# The static checks, run by the README's test command (scripts/test.sh) before the tests; all three
# run, each says what it found, and any finding fails the script. Configured in pyproject.toml:
#   ruff          pyflakes, pycodestyle, isort, bugbear, pyupgrade at the code's line length (120)
#   mypy          with the pydantic plugin over harness/; strict on the contracts, errors and results
#   lint-imports  the import contracts: one layer order (docs/architecture.md), no circles, the providers, scorers,
#                 agent runners and standalone environment families independent, the docker SDK,
#                 AutoGen and huggingface_hub each in their one package, providers reached through the registry
# They come with the dev extra (scripts/setup.sh installs it). Together they take well under a minute.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
for tool in ruff mypy lint-imports; do
  if [[ ! -x .venv/bin/$tool ]]; then
    echo "check.sh: .venv/bin/$tool is missing: run 'bash scripts/setup.sh' (it installs the dev extra)" >&2
    exit 1
  fi
done
failed=()
check() {
  local name="$1"; shift
  local start=$SECONDS
  echo "check.sh: $name"
  if "$@"; then
    echo "check.sh: $name passed ($((SECONDS - start)) s)"
  else
    echo "check.sh: $name FAILED (its findings are above)" >&2
    failed+=("$name")
  fi
}
check ruff .venv/bin/ruff check --output-format concise
# One cache per checkout path, outside it (pyproject.toml says why).
check mypy .venv/bin/mypy --cache-dir "$HOME/.cache/harness/mypy/$(printf %s "$ROOT" | sha1sum | cut -c1-12)"
check import-linter .venv/bin/lint-imports --no-logo
if (( ${#failed[@]} )); then
  echo "check.sh: failed: ${failed[*]}" >&2
  exit 1
fi
