#!/usr/bin/env bash
# Build a Debian base image from Debian packages alone (debootstrap + docker import),
# for machines where no container registry can be reached.
# Usage: images/base/build.sh TAG
# The mirror is the one this machine's apt already uses (HARNESS_DEBIAN_MIRROR overrides).
set -euo pipefail
TAG="${1:?usage: build.sh TAG}"
SUITE="${HARNESS_DEBIAN_SUITE:-bookworm}"
mirror="${HARNESS_DEBIAN_MIRROR:-}"
if [[ -z "$mirror" ]]; then
  mirror="$( (grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}';
              grep -hs '^deb ' /etc/apt/sources.list | awk '{print $2}') | grep -v security | head -n1)" || true
fi
if [[ -z "$mirror" ]]; then
  echo "base image: cannot read a Debian mirror from apt's sources; set HARNESS_DEBIAN_MIRROR" >&2
  exit 2
fi
if ! command -v debootstrap >/dev/null 2>&1; then
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  else
    echo "base image: debootstrap is missing; install it (apt-get install debootstrap)" >&2
    exit 2
  fi
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
debootstrap --variant=minbase --include=ca-certificates "$SUITE" "$work/root" "$mirror" >"$work/log" 2>&1 \
  || { tail -n 30 "$work/log" >&2; exit 1; }
# Keep the image's apt pointed at the same mirror, with security updates.
echo "deb $mirror $SUITE main" > "$work/root/etc/apt/sources.list"
rm -rf "$work/root/var/cache/apt/archives/"*.deb "$work/root/var/lib/apt/lists/"*
tar -C "$work/root" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["/bin/bash"]' --change "LABEL harness.image=$TAG" - "$TAG" >/dev/null
echo "$TAG"
