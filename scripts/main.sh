#!/usr/bin/env bash
# README command 1: set everything up, then run the main job: the bundled GAIA-style
# smoke set, evaluated with the offline replay model in real sandboxes. It fails (exit 5) when a
# replayed tool result differs from the recording's: the environment is broken.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
.venv/bin/harness run --dataset datasets/gaia-smoke --model replay --agent assistant \
  --website datasets/gaia-smoke/website \
  --output-dir "runs/gaia-smoke-$(date +%Y%m%d-%H%M%S)" --workers 2 --fail-on-divergence "$@"
