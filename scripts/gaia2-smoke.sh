#!/usr/bin/env bash
# The Gaia2 smoke on a fresh machine: set everything up (scripts/setup.sh), then run datasets/gaia2-smoke's
# three ARE scenarios with the oracle agent in real sandboxes of the gaia2 image (built offline the first time,
# about 3 minutes): every scenario must pass ARE's own judge. Arguments go to `harness run`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
.venv/bin/harness run --dataset datasets/gaia2-smoke --agent oracle --epochs 1 \
  --output-dir "runs/gaia2-smoke-$(date +%Y%m%d-%H%M%S)" --workers 2 "$@"
