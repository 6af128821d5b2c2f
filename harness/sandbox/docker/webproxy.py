"""The run's web proxy (`--web-record`, `--web-replay`): mitmproxy with the harness's WARC addon
(images/webproxy/) in a container of its own on the run's sandbox network.

`web_proxy(...)` starts it and yields a `WebProxy` (its address, the run CA's SPKI hash); while it
runs, every sandbox created on that network gets HARNESS_BROWSER_FLAGS (`browser_env`), which
sandboxd adds to Chromium's command line: `--proxy-server` at the proxy and
`--ignore-certificate-errors-spki-list` with the run CA's key hash; and HARNESS_WEB_PROXY and
HARNESS_WEB_CA (the CA's certificate), which the tools' own fetches use (environments/proxied.py:
fetch_url, download_file, the site search's crawl). The CA is made for the run (an RSA key and a
self-signed certificate, in memory), its key given to the proxy container alone and never written on
the host: only that run's browsers and tools trust it, for as long as the run lasts, and no store of
the host or of the image ever holds it.

Record: the proxy writes /data/web.warc.gz (one gzip member per record, flushed at once) on a volume of the
run's own (webarchive.py), kept in `out` (RUN_DIR/web/...) when the run's services stop, or, after the run
was killed, by the next harness that reaps it: removing the proxy's container never removes the archive.
Replay: the archives are copied into /archives before it starts; its network is internal (no route out),
and the addon never goes upstream. Upstream certificates are checked against the image's CA bundle plus
HARNESS_WEB_UPSTREAM_CA when set (a site with its own certificate, a TLS-intercepting proxy).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import io
import logging
import tarfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.errors import InfraError
from harness.fsutil import tree_hash
from harness.sandbox.docker import engine, images, naming, networks, storage, webarchive

log = logging.getLogger(__name__)

PORT = 8080
READY_TIMEOUT_S = 60.0
RULES = Path(__file__).resolve().parents[2] / "web" / "rules.py"
# network -> (the proxy's container, the sandboxes' environment) while a proxy serves it
_SERVING: dict[str, tuple[str, dict[str, str]]] = {}


@dataclass(frozen=True)
class WebProxy:
    mode: str  # record | replay
    network: str
    address: str
    spki: str  # base64 SHA-256 of the run CA's SubjectPublicKeyInfo
    certificate: str  # the run CA's certificate, PEM (its key stays in the proxy's container)

    def browser_flags(self) -> str:
        return (f"--proxy-server=http://{self.address}:{PORT} --proxy-bypass-list=<-loopback> "
                f"--ignore-certificate-errors-spki-list={self.spki}")


def browser_env(network: str) -> dict[str, str]:
    """The environment of a sandbox created on `network` (provider._create_kwargs)."""
    return dict(_SERVING[network][1]) if network in _SERVING else {}


def register(spec, attrs: dict) -> None:
    """Tell the proxy of the sandbox's network which instance and attempt its address is, once it runs
    (/tags/ADDRESS in the proxy's container: the addon reads it per request; an address a later
    sandbox reuses is written over before that sandbox makes a request)."""
    network = spec.network.removeprefix("internal:")
    if network not in _SERVING:
        return
    address = (attrs.get("NetworkSettings", {}).get("Networks", {}).get(network) or {}).get("IPAddress")
    if address:
        container_id = _SERVING[network][0]
        archive = _tar({f"tags/{address}": f"{spec.instance_id}/{spec.attempt}".encode()})
        engine.call("copy", lambda: engine.client().api.put_archive(container_id, "/", archive))


def tag() -> str:
    digest = hashlib.sha256((tree_hash(images.images_dir() / "webproxy") + tree_hash(RULES.parent)).encode())
    return f"harness-webproxy:{digest.hexdigest()[:12]}"


def build(log_=print) -> str:
    """The proxy image, built on the sandbox image's base when its tag is missing."""
    from filelock import FileLock

    name = tag()
    if images._exists(name):  # present: taken without waiting for another engine's build (images.py)
        return name
    with FileLock(str(images.lock_path())):
        if images._exists(name):
            return name
        base = images._ensure_base(log_)
        log_(f"building {name} on {base} ...")
        images._build_context(images.images_dir() / "webproxy", name, {"BASE_IMAGE": base}, {"rules.py": RULES})
        log_(f"built {name}")
    return name


def run_ca() -> tuple[bytes, bytes, str]:
    """A fresh CA for one run: (mitmproxy's PEM, key then certificate; the certificate alone, PEM, for the
    sandboxes' tools; the SPKI hash for Chromium)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "harness web proxy (one run)")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=7))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    certificate = cert.public_bytes(serialization.Encoding.PEM)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                            serialization.NoEncryption()) + certificate
    spki = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return pem, certificate, base64.b64encode(hashlib.sha256(spki).digest()).decode()


def _tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.uid, info.gid, info.mtime = len(data), 0o600, 1000, 1000, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@contextmanager
def _own_network(run_id: str) -> Iterator[str]:
    """A fresh internal network (no route out) for a replay without the site, sealed like the site's."""
    api = engine.client().api
    network = f"harness-replay-{naming.slug(run_id, 40)}"
    options = networks.site_bridge_options()
    engine.call("network create", lambda: api.create_network(
        network, driver="bridge", internal=True, options=options, labels=naming.labels(run_id, "webproxy", 1),
        check_duplicate=True))
    try:
        if problem := networks.seal_site(networks.bridge_of({"Options": options})):
            log.warning(networks.unsealed_warning(f"internal:{network}", engine.call(
                "network inspect", lambda: api.inspect_network(network)), problem))
        yield network
    finally:
        engine.remove_network(network)
        networks.unseal_gone_sites()


@contextmanager
def web_proxy(mode: str, run_id: str, network: str | None, *, out: Path | None = None,
              archives: tuple[Path, ...] = (), hosts: dict[str, str] | None = None,
              upstream_ca: bytes | None = None, log_=print) -> Iterator[WebProxy]:
    """Serve the run's sandboxes through the proxy; `network` is the site's (record), None for a network
    of the proxy's own (replay). Yields once the proxy listens; the archive is in `out` after."""
    if mode not in ("record", "replay"):
        raise ValueError(f"web proxy mode {mode!r}")
    image = build(log_)
    # (the archive's volume, the file it is kept in) when recording
    archive = (webarchive.create(run_id, out.resolve(), image), out.resolve()) \
        if mode == "record" and out is not None else None
    served = False
    try:
        with _own_network(run_id) if network is None else _given(network) as net:
            container_id, ca = _create(mode, run_id, net, image, archives, hosts, upstream_ca,
                                       archive[0] if archive else None)
            try:
                proxy = _start(container_id, mode, net, ca)
                served = True
                _SERVING[net] = (container_id, {"HARNESS_BROWSER_FLAGS": proxy.browser_flags(),
                                                "HARNESS_WEB_PROXY": f"http://{proxy.address}:{PORT}",
                                                "HARNESS_WEB_CA": proxy.certificate})
                try:
                    yield proxy
                except BaseException:  # a Ctrl-C or a crash: keep what was recorded, and let it go on up
                    _SERVING.pop(net, None)
                    if archive is not None:
                        _keep_or_say(*archive)
                    raise
                _SERVING.pop(net, None)
                if archive is not None and not webarchive.keep(*archive):
                    raise InfraError(f"the web proxy's archive was lost before it was kept in {archive[1]}")
            finally:
                engine.remove_container(container_id)
    finally:
        if archive is not None and not served:
            webarchive.discard(archive[0])  # nothing was recorded


def _create(mode: str, run_id: str, net: str, image: str, archives: tuple[Path, ...], hosts: dict[str, str] | None,
            upstream_ca: bytes | None, volume: str | None) -> tuple[str, tuple[bytes, str]]:
    """The proxy's container on `net` with its files, not started: (its id, (the CA's certificate, SPKI hash))."""
    api = engine.client().api
    pem, certificate, spki = run_ca()
    command = ["--listen-port", str(PORT), "--set", "confdir=/ca", "--set", "block_global=false"]
    files = {"ca/mitmproxy-ca.pem": pem}
    if mode == "replay":
        command += ["--set", "connection_strategy=lazy", "--set", "upstream_cert=false"]
        files |= {f"archives/{n}.warc.gz": Path(p).read_bytes() for n, p in enumerate(archives)}
    if upstream_ca:
        command += ["--set", "ssl_verify_upstream_trusted_ca=/ca/upstream.pem"]
        files["ca/upstream.pem"] = Path("/etc/ssl/certs/ca-certificates.crt").read_bytes() + b"\n" + upstream_ca
    host_config = api.create_host_config(network_mode=net, mem_limit="1g", pids_limit=256, cap_drop=["ALL"],
                                         security_opt=["no-new-privileges"], extra_hosts=hosts or None,
                                         log_config=storage.LOG_CONFIG,
                                         binds=webarchive.binds(volume) if volume is not None else None)
    created = engine.call("create", lambda: api.create_container(
        image, command=command, environment={"HARNESS_WEB_MODE": mode}, name=f"{net}-webproxy",
        labels=naming.labels(run_id, "webproxy", 1), host_config=host_config), retries=0)
    try:
        engine.call("copy", lambda: api.put_archive(created["Id"], "/", _tar(files)))
    except BaseException:
        engine.remove_container(created["Id"])
        raise
    return created["Id"], (certificate, spki)


def _start(container_id: str, mode: str, net: str, ca: tuple[bytes, str]) -> WebProxy:
    """Start the created proxy; it once it listens."""
    api = engine.client().api
    engine.call("start", lambda: api.start(container_id), retries=0)
    _wait_ready(container_id)
    attrs = engine.call("inspect", lambda: api.inspect_container(container_id))
    return WebProxy(mode, net, attrs["NetworkSettings"]["Networks"][net]["IPAddress"], ca[1], ca[0].decode())


def _keep_or_say(volume: str, out: Path) -> None:
    """The archive kept in `out` while something else goes on up; a loss is logged, never raised over it."""
    try:
        if not webarchive.keep(volume, out):
            log.warning("the web proxy's archive was lost before it was kept in %s", out)
    except Exception as exc:  # noqa: BLE001 - said; the volume stays for the next cleanup to keep
        log.warning("the web proxy's archive could not be kept in %s now (its volume %s stays for the next "
                    "harness run or `harness cleanup` to keep): %s", out, volume, exc)


@contextmanager
def _given(network: str) -> Iterator[str]:
    yield network


def _wait_ready(container_id: str) -> None:
    api = engine.client().api
    deadline = time.monotonic() + READY_TIMEOUT_S
    while b"ready" not in (logs := engine.call("logs", lambda: api.logs(container_id))):
        if time.monotonic() > deadline or not engine.container_state(container_id).get("Running"):
            raise InfraError(f"the web proxy did not start: {logs[-2000:]!r}")
        time.sleep(0.1)
