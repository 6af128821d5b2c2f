#!/usr/bin/env bash
# README command 1: set everything up, then run the main job.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
.venv/bin/harness smoke --sandboxes 8
