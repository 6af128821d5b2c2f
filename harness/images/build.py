"""Build the sandbox image offline, tagged by a hash of `images/`.

A change anywhere under `images/` changes the tag and so triggers a build; no
change finds the tag present and skips it. Concurrent builders (several harness
processes, parallel test workers) are serialized by a file lock.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import docker.errors
from filelock import FileLock

from harness.errors import InfraError, InputError
from harness.sandbox.docker import engine
from harness.state import state_dir

LABEL = "harness.image"
# The base used when it is present or pullable; otherwise one is built from
# Debian packages by images/base/build.sh. Pin a digest here for reproducibility.
DEFAULT_BASE = os.environ.get("HARNESS_BASE_IMAGE", "debian:bookworm-slim")
# A registry that cannot be reached should fail fast, not stall the build.
PULL_TIMEOUT_S = float(os.environ.get("HARNESS_PULL_TIMEOUT", 60))
# Where builds read an extra CA bundle (TLS-intercepting proxies). Empty: none.
CA_ENV_VARS = ("HARNESS_BUILD_CA_BUNDLE", "PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")


def images_dir() -> Path:
    explicit = os.environ.get("HARNESS_IMAGES_DIR")
    return Path(explicit) if explicit else Path(__file__).resolve().parents[2] / "images"


def tree_hash(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


@dataclass(frozen=True)
class ImageInfo:
    tag: str
    id: str
    size_mb: float
    created: str


def sandbox_tag() -> str:
    return f"harness-sandbox:{tree_hash(images_dir())}"


def _exists(tag: str) -> bool:
    try:
        engine.client().images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


# The system bundle is passed when no variable names one: on a machine behind a
# TLS-intercepting proxy its CA is installed there; elsewhere it holds the usual CAs.
SYSTEM_CA = Path("/etc/ssl/certs/ca-certificates.crt")


def _extra_ca() -> Path | None:
    for var in CA_ENV_VARS:
        value = os.environ.get(var)
        if value and Path(value).is_file():
            return Path(value)
    return SYSTEM_CA if SYSTEM_CA.is_file() else None


def _ensure_base(log) -> str:
    if _exists(DEFAULT_BASE):
        return DEFAULT_BASE
    if os.environ.get("HARNESS_NO_PULL") != "1":
        try:
            api = engine.client().api
            api.timeout = PULL_TIMEOUT_S
            engine.client().images.pull(DEFAULT_BASE)
            return DEFAULT_BASE
        except Exception as exc:  # noqa: BLE001 - any failure means: build our own base
            log(f"cannot pull {DEFAULT_BASE} ({type(exc).__name__}); building a base from Debian packages")
        finally:
            engine.client().api.timeout = engine.HARNESS_DOCKER_TIMEOUT
    base_dir = images_dir() / "base"
    tag = f"harness-base:{tree_hash(base_dir)}"
    if not _exists(tag):
        proc = subprocess.run(["bash", str(base_dir / "build.sh"), tag], capture_output=True, text=True)
        if proc.returncode != 0:
            raise InfraError(f"building base image {tag} failed:\n{proc.stderr[-3000:]}")
    return tag


def build(*, force: bool = False, log=print) -> str:
    """Ensure the sandbox image exists; return its tag."""
    root = images_dir()
    if not (root / "sandbox" / "Dockerfile").is_file():
        raise InputError(f"no sandbox Dockerfile under {root}")
    tag = sandbox_tag()
    lock = FileLock(str(state_dir() / "images.lock"))
    with lock:
        if not force and _exists(tag):
            return tag
        base = _ensure_base(log)
        log(f"building {tag} on {base} ...")
        with tempfile.TemporaryDirectory(prefix="harness-build-") as ctx:
            shutil.copytree(root / "sandbox", ctx, dirs_exist_ok=True)
            ca = _extra_ca()
            Path(ctx, "build-ca.crt").write_bytes(ca.read_bytes() if ca else b"")
            tail: list[str] = []
            api = engine.client().api
            for chunk in api.build(path=ctx, tag=tag, buildargs={"BASE_IMAGE": base},
                                   labels={LABEL: tag}, rm=True, forcerm=True, decode=True):
                line = chunk.get("stream") or chunk.get("status") or ""
                if line.strip():
                    tail = (tail + [line.rstrip()])[-40:]
                if "error" in chunk:
                    raise InfraError(f"building {tag} failed: {chunk['error']}\n" + "\n".join(tail))
        log(f"built {tag}")
        return tag


def list_images() -> list[ImageInfo]:
    found = []
    for image in engine.client().images.list(filters={"label": LABEL}):
        for tag in image.tags:  # untagged ones are build stages (the toolbox stage inherits the label)
            found.append(ImageInfo(tag, image.short_id.removeprefix("sha256:"), image.attrs.get("Size", 0) / 1e6,
                                   image.attrs.get("Created", "")[:19]))
    return found


def prune(log=print) -> list[str]:
    """Remove harness sandbox images other than the current tag (kept: the base, images in use)."""
    current, removed = sandbox_tag(), []
    for info in list_images():
        if info.tag.startswith("harness-sandbox:") and info.tag != current:
            try:
                engine.client().images.remove(info.tag)
                removed.append(info.tag)
            except docker.errors.APIError as exc:  # in use by a container: keep it
                log(f"kept {info.tag}: {exc.explanation or exc}")
    return removed
