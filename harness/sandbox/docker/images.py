"""Build the sandbox image offline, tagged by a hash of its build context.

The context is the top-level `images/` (shipped in the package, so an installed wheel builds too):
`base/build.sh` (a Debian base from packages, for machines without a registry) and
`sandbox/` (Dockerfile, toolbox requirements, sandboxd). A change anywhere there changes the tag
and so triggers a build; no change finds the tag present and skips it. Concurrent builders (several harness
processes, parallel test workers) are serialized by a file lock of the engine they build on (`lock_path`):
a tag already present is taken without waiting for it, so a run on one engine never waits for a build or a
copy (minutes for ~1.6 GB) to another (it did: one machine-wide lock held a local run behind a copy to a
remote engine for as long as the copy took).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from filelock import FileLock

from harness.errors import EngineNotFound, InfraError, InputError
from harness.fsutil import tree_hash
from harness.sandbox.contract import ImageInfo
from harness.sandbox.docker import engine
from harness.settings import settings

LABEL = "harness.image"
# Where builds read an extra CA bundle (TLS-intercepting proxies) besides HARNESS_BUILD_CA_BUNDLE.
CA_ENV_VARS = ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")


def images_dir() -> Path:
    """The image build contexts: HARNESS_IMAGES_DIR, else the project's top-level `images/`, which an
    installed package carries as `harness/images/` (setup.py) and a checkout holds beside `harness/`."""
    package = Path(__file__).resolve().parents[2]
    shipped = package / "images"
    return settings().images_dir or (shipped if shipped.is_dir() else package.parent / "images")


def sandbox_tag() -> str:
    """The tree hash of the sandbox image's own contexts (base and sandbox): an image of another context
    (webproxy, a benchmark's) changing leaves it alone."""
    root = images_dir()
    return f"harness-sandbox:{tree_hash(root / 'base')[:6]}{tree_hash(root / 'sandbox')[:6]}"


def named_tag(name: str) -> str:
    """A benchmark's image (images/NAME, built on the sandbox image): its context's hash and the sandbox's whole
    (its base's and its own: a new sandboxd is a new benchmark image too)."""
    return f"harness-{name}:{tree_hash(images_dir() / name)[:6]}{sandbox_tag().split(':')[1]}"


def build_named(name: str, *, log=print) -> str:
    """Make the benchmark image `name` present on the engine (the sandbox image first); return its tag. Built
    offline like the sandbox image, from images/NAME/Dockerfile with SANDBOX_IMAGE as its base."""
    context = images_dir() / name
    if not name.isidentifier() or not (context / "Dockerfile").is_file():
        raise InputError(f"no image named {name!r}: images/{name}/Dockerfile does not exist")
    base, tag = build(log=log), named_tag(name)
    if _exists(tag):
        return tag
    with FileLock(str(lock_path())):
        if not _exists(tag):
            log(f"building {tag} on {base} ...")
            _build_context(context, tag, {"SANDBOX_IMAGE": base})
            log(f"built {tag}")
    return tag


def _exists(tag: str) -> bool:
    try:
        engine.call("image inspect", lambda: engine.client().api.inspect_image(tag))
        return True
    except EngineNotFound:
        return False


def pull(ref: str) -> str | None:
    """Pull `ref` onto the engine; None when it is there after, else why not. A registry that cannot be reached
    fails fast: a client of its own with the pull timeout (the shared client's timeout is never changed)."""
    try:
        puller = engine.new_client(timeout=settings().pull_timeout)
        try:
            engine.call("pull", lambda: puller.api.pull(ref), retries=0)
        finally:
            puller.close()
    except Exception as exc:  # noqa: BLE001 - any failure means: not pulled
        return f"cannot pull {ref} ({type(exc).__name__})"
    return None if _exists(ref) else f"pulling {ref} gave no image"


# The system bundle is passed when no variable names one: on a machine behind a
# TLS-intercepting proxy its CA is installed there; elsewhere it holds the usual CAs.
SYSTEM_CA = Path("/etc/ssl/certs/ca-certificates.crt")


def _extra_ca() -> Path | None:
    candidates = [settings().build_ca_bundle] + [os.environ.get(var) for var in CA_ENV_VARS]
    for value in candidates:
        if value and Path(value).is_file():
            return Path(value)
    return SYSTEM_CA if SYSTEM_CA.is_file() else None


def _ensure_base(log) -> str:
    base = settings().base_image
    if _exists(base):
        return base
    if not settings().no_pull:
        problem = pull(base)
        if problem is None:
            return base
        log(f"{problem}; building a base from Debian packages")
    base_dir = images_dir() / "base"
    tag = f"harness-base:{tree_hash(base_dir)}"
    if not _exists(tag):
        proc = subprocess.run(["bash", str(base_dir / "build.sh"), tag], capture_output=True, text=True,
                              env=engine.cli_env())
        if proc.returncode != 0:
            raise InfraError(f"building base image {tag} failed:\n{proc.stderr[-3000:]}")
    return tag


def build(*, force: bool = False, log=print) -> str:
    """Make the sandbox image present on the engine; return its tag.

    On an engine given by --docker-host it is copied from this machine's own engine when that one
    has the tag (`docker save | docker load`, the same bytes as here); otherwise it is built on the
    engine itself. When neither works, one InfraError says what was tried and why it failed."""
    root = images_dir()
    if not (root / "sandbox" / "Dockerfile").is_file():
        raise InputError(f"no sandbox Dockerfile under {root}")
    tag = sandbox_tag()
    if not force and _exists(tag):
        return tag
    with FileLock(str(lock_path())):
        if not force and _exists(tag):  # another process made it while this one waited
            return tag
        local = engine.local_client()
        if local is None:
            return _build(tag, root, log)
        try:
            if not force and _copy_from(local, tag, log):
                return tag
            try:
                return _build(tag, root, log)
            except InfraError as exc:
                raise InfraError(f"the sandbox image {tag} is not on the engine {engine.engine_url()}, this "
                                 f"machine's engine does not have it to copy (run `harness images build` here "
                                 f"first), and building it there failed: {exc}") from exc
        finally:
            local.close()


def lock_path() -> Path:
    """The file lock of image builds and copies onto the engine this process talks to."""
    return engine.lock_path("images")


def _copy_from(source, tag: str, log) -> bool:
    """Stream the image from another engine into ours; False when the source does not have it."""
    try:
        engine.call("image inspect", lambda: source.api.inspect_image(tag))
    except EngineNotFound:
        return False
    log(f"copying {tag} to {engine.engine_url()} (docker save | docker load) ...")
    started = time.monotonic()
    target = engine.new_client(timeout=1800)  # a load of ~1.6 GB takes minutes on a slow link
    try:
        for line in engine.call("image load", lambda: target.api.load_image(source.api.get_image(tag)), retries=0):
            if isinstance(line, dict) and line.get("error"):
                raise InfraError(f"loading {tag} into {engine.engine_url()} failed: {line['error']}")
    finally:
        target.close()
    if not _exists(tag):
        raise InfraError(f"loading {tag} into {engine.engine_url()} left no such image")
    log(f"copied {tag} in {time.monotonic() - started:.0f} s")
    return True


def _build(tag: str, root: Path, log) -> str:
    """Build the image on the engine (its base first when missing)."""
    base = _ensure_base(log)
    log(f"building {tag} on {base} ...")
    _build_context(root / "sandbox", tag, {"BASE_IMAGE": base})
    log(f"built {tag}")
    return tag


def _build_context(context: Path, tag: str, args: dict[str, str], extra: dict[str, Path] | None = None) -> None:
    """Build one context, plus `extra` files (name in the context: source), with the build CA a pip behind a
    TLS-intercepting proxy needs, as build-ca.crt."""
    with tempfile.TemporaryDirectory(prefix="harness-build-") as ctx:
        shutil.copytree(context, ctx, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for name, source in (extra or {}).items():
            shutil.copy(source, Path(ctx, name))
        ca = _extra_ca()
        Path(ctx, "build-ca.crt").write_bytes(ca.read_bytes() if ca else b"")
        engine.call("build", lambda: _stream_build(ctx, tag, args), retries=0)


def _stream_build(ctx: str, tag: str, args: dict[str, str], deadline: float | None = None) -> None:
    """Build `ctx` as `tag`, reading the engine's stream; with a `deadline` (time.monotonic()), on a client of its
    own that waits no longer for the next line, closed at the deadline (the engine then cancels the build):
    engine.BuildTimedOut."""
    import requests.exceptions
    import urllib3.exceptions

    # The longest wait for the next line: given to the build call itself, whose default is none (not the client's).
    wait = None if deadline is None else max(1.0, deadline - time.monotonic())
    client = engine.client() if deadline is None else engine.new_client(timeout=wait)
    tail: list[str] = []
    try:
        for chunk in client.api.build(path=ctx, tag=tag, buildargs=args, labels={LABEL: tag}, rm=True, forcerm=True,
                                      decode=True, timeout=wait):
            line = chunk.get("stream") or chunk.get("status") or ""
            if line.strip():
                tail = (tail + [line.rstrip()])[-40:]
            if "error" in chunk:
                raise engine.build_failure(tag, chunk["error"], tail)
            if deadline is not None and time.monotonic() > deadline:
                raise engine.BuildTimedOut(f"building {tag} did not end in time:\n" + "\n".join(tail))
    except (requests.exceptions.ConnectionError, requests.exceptions.Timeout, urllib3.exceptions.HTTPError, OSError):
        if deadline is None or time.monotonic() < deadline:
            raise
        raise engine.BuildTimedOut(f"building {tag} did not end in time:\n" + "\n".join(tail)) from None
    finally:
        if deadline is not None:
            client.close()  # the stream with it: the engine cancels the build


def list_images() -> list[ImageInfo]:
    import datetime as dt

    current = sandbox_tag()
    found = []
    for image in engine.call("image list", lambda: engine.client().api.images(filters={"label": LABEL})):
        for tag in image.get("RepoTags") or []:  # untagged ones are build stages (the toolbox stage inherits the label)
            if tag == "<none>:<none>":
                continue
            created = dt.datetime.fromtimestamp(image.get("Created", 0), dt.UTC).isoformat()[:19]
            found.append(ImageInfo(tag, image["Id"].removeprefix("sha256:")[:12], image.get("Size", 0) / 1e6,
                                   created, current=tag == current))
    return found


def prune(log=print) -> list[str]:
    """Remove harness sandbox images other than the current tag (kept: the base, images in use)."""
    current, removed = sandbox_tag(), []
    for info in list_images():
        if info.tag.startswith("harness-sandbox:") and info.tag != current:
            try:
                engine.call("image remove", lambda: engine.client().api.remove_image(info.tag),  # noqa: B023 - called now
                            retries=0)
                removed.append(info.tag)
            except InfraError as exc:  # in use by a container (EngineConflict): keep it
                log(f"kept {info.tag}: {exc}")
    return removed
