# The harness itself as an image, for the local docker-compose session (docker-compose.yml,
# README "Local docker-compose session"): it drives the host's Docker engine through its socket.
# scripts/compose.sh supplies the build arguments: BASE_IMAGE (any Debian bookworm image:
# debian:bookworm-slim, or the offline harness-base:<hash> that `harness images build` makes on
# machines without a registry) and the optional CA bundle for package installs behind a
# TLS-intercepting proxy, which only the build stage sees (never the final image).
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${BASE_IMAGE} AS os
# libatomic1: the Node.js runtime bundled with Playwright (it drives the sandbox's Chromium over CDP).
# iptables: the firewall rules of the isolated sandbox network (networks.py), applied as on a host
# when the service runs as root (docker-compose.yml gives it NET_ADMIN in the host's network namespace).
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates libatomic1 iptables \
 && rm -rf /var/lib/apt/lists/*

# Build stage. Dependencies first (a layer that changes only with pyproject.toml), then the
# source (installed without network). The CA file is copied only when present.
FROM os AS build
ARG PIP_INDEX_URL=
ARG PIP_EXTRA_INDEX_URL=
RUN python3 -m venv /opt/harness
COPY pyproject.toml .harness/compose-build-ca.cr[t] /tmp/deps/
RUN cd /tmp/deps \
 && if [ -s compose-build-ca.crt ]; then export PIP_CERT=/tmp/deps/compose-build-ca.crt; fi \
 && if [ -z "$PIP_INDEX_URL" ]; then unset PIP_INDEX_URL; fi \
 && if [ -z "$PIP_EXTRA_INDEX_URL" ]; then unset PIP_EXTRA_INDEX_URL; fi \
 && python3 -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > requirements.txt \
 && /opt/harness/bin/pip install --no-cache-dir --disable-pip-version-check -r requirements.txt "setuptools>=68" wheel \
 && rm -rf /tmp/deps
COPY pyproject.toml setup.py README.md /tmp/src/
COPY harness /tmp/src/harness
COPY images /tmp/src/images
RUN /opt/harness/bin/pip install --no-cache-dir --disable-pip-version-check --no-deps --no-build-isolation /tmp/src \
 && rm -rf /tmp/src

FROM os
COPY --from=build /opt/harness /opt/harness
ENV PATH=/opt/harness/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONUNBUFFERED=1
WORKDIR /work
ENTRYPOINT ["harness"]
CMD ["--help"]
