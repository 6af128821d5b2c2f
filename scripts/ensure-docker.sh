#!/usr/bin/env bash
# Make a Docker engine reachable, starting one only when we must.
#  1. If DOCKER_HOST or the default socket answers, use it (never touch it).
#  2. Otherwise, as root on Debian/Ubuntu: install the distribution's engine
#     (docker.io) if missing and start dockerd in the background.
#  3. Otherwise: explain what to do and exit 1.
# An engine we start records its PID in .docker-engine.pid (project root) so a
# later run can tell "ours" from "someone else's"; we never stop any engine.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WAIT_SECONDS="${HARNESS_DOCKERD_WAIT:-60}"

answers() { timeout 10 docker info >/dev/null 2>&1; }

if command -v docker >/dev/null 2>&1 && answers; then
  exit 0
fi
if [[ -n "${DOCKER_HOST:-}" ]]; then
  echo "ensure-docker: DOCKER_HOST=${DOCKER_HOST} is set but does not answer 'docker info'." >&2
  echo "ensure-docker: start that engine or unset DOCKER_HOST to use a local one." >&2
  exit 1
fi
if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-docker: no Docker engine answers and I can only install one as root on Debian/Ubuntu." >&2
  echo "ensure-docker: install Docker (https://docs.docker.com/engine/install/), start it, add yourself" >&2
  echo "ensure-docker: to the 'docker' group (or set DOCKER_HOST), then run this again." >&2
  exit 1
fi
if ! command -v dockerd >/dev/null 2>&1; then
  echo "ensure-docker: installing the distribution's Docker engine (docker.io)..." >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq docker.io >/dev/null
fi
# The host engine is the dockerd of the default pid file (a test's second engine, also a
# dockerd, has its own). A killed dockerd leaves its pid file behind; a new one refuses to
# start while that PID is alive. Remove the file only if the PID is gone or is not a dockerd.
PIDFILE=/var/run/docker.pid
running=0
if [[ -f "$PIDFILE" ]]; then
  old="$(cat "$PIDFILE" 2>/dev/null || true)"
  if [[ -n "$old" ]] && [[ "$(cat /proc/"$old"/comm 2>/dev/null || true)" == dockerd ]]; then
    echo "ensure-docker: a dockerd (pid $old) runs but does not answer yet; waiting for it." >&2
    running=1
  else
    rm -f "$PIDFILE"
  fi
fi
if (( ! running )); then
  LOG="${HARNESS_DOCKERD_LOG:-/var/log/harness-dockerd.log}"
  echo "ensure-docker: starting dockerd in the background (log: $LOG)" >&2
  # setsid: the engine must outlive this script and the shell that ran it.
  setsid dockerd >"$LOG" 2>&1 < /dev/null &
  echo $! > "$ROOT/.docker-engine.pid"
fi
for _ in $(seq 1 "$WAIT_SECONDS"); do
  if answers; then exit 0; fi
  sleep 1
done
echo "ensure-docker: dockerd did not answer within ${WAIT_SECONDS}s; see ${LOG:-/var/log/harness-dockerd.log}." >&2
exit 1
