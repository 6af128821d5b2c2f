"""A second Docker engine on this machine, for remote-engine and swarm-worker tests.

The engine runs in a network namespace of its own (a veth pair to the host, a /24 of its
own), so its ports (2376 TLS, swarm's 2377/7946/4789, the sandboxes' published ports) never
clash with the host engine's, and its iptables rules live in that namespace, not on the host.
It has its own data root, exec root, pid file and unix socket, and a TLS listener
(`tcp://ADDR:2376`, client certificates from a CA made for it) for the remote-engine tests.
Nothing of the host engine is touched: not docker0, not its networks, not its swarm state.

The data root persists under /var/lib/harness-test-engines/NAME (images loaded into it, e.g. the
sandbox image, survive to the next session); everything else (the namespace, the veth pair,
the process, the certificates) is made by `start()` and removed by `stop()`.

Why the steps (measured here, see ../shared/notes/platform.md): `ip netns exec` remounts /sys,
hiding the cgroup v1 hierarchies, so the start script mounts them again; a resolv.conf naming
127.0.0.1 makes the engine's failed pull of a local-only image fail at once instead of after a
20 s DNS timeout.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tests.helpers.locks import machine_lock

DATA_ROOT = Path("/var/lib/harness-test-engines")
CGROUPS = ("cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids")


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=check, capture_output=True, text=True)


def _used_networks() -> list[ipaddress.IPv4Network]:
    out = _run("ip", "-4", "-o", "addr").stdout + _run("ip", "-4", "-o", "route").stdout
    nets = []
    for word in out.split():
        if "/" in word and word[0].isdigit():
            try:
                nets.append(ipaddress.ip_network(word, strict=False))
            except ValueError:
                pass
    return nets


def free_subnet(base: str = "10.213.0.0/16") -> ipaddress.IPv4Network:
    """A /24 in base that no interface or route of this machine uses."""
    used = _used_networks()
    for net in ipaddress.ip_network(base).subnets(new_prefix=24):
        if not any(net.overlaps(other) for other in used):
            return net
    raise RuntimeError(f"no free /24 in {base}")


def make_certs(directory: Path, server_ip: str) -> None:
    """ca.pem, server-{cert,key}.pem (for server_ip), and the client's cert.pem/key.pem (Docker's names)."""
    directory.mkdir(parents=True, exist_ok=True)

    def ossl(*args: str) -> None:
        _run("openssl", *args)

    d = str(directory)
    ossl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=harness-test-ca",
         "-keyout", f"{d}/ca-key.pem", "-out", f"{d}/ca.pem")
    for who, ext in (("server", f"subjectAltName=IP:{server_ip},IP:127.0.0.1\nextendedKeyUsage=serverAuth"),
                     ("client", "extendedKeyUsage=clientAuth")):
        key, csr, cert = (f"{d}/key.pem", f"{d}/client.csr", f"{d}/cert.pem") if who == "client" else \
            (f"{d}/server-key.pem", f"{d}/server.csr", f"{d}/server-cert.pem")
        ossl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN=harness-test-{who}", "-keyout", key,
             "-out", csr)
        Path(d, f"{who}.ext").write_text(ext + "\n")
        ossl("x509", "-req", "-in", csr, "-CA", f"{d}/ca.pem", "-CAkey", f"{d}/ca-key.pem", "-CAcreateserial",
             "-days", "2", "-extfile", f"{d}/{who}.ext", "-out", cert)


class SecondEngine:
    """A dockerd in its own network namespace. `with SecondEngine() as eng:` or start()/stop()."""

    def __init__(self, name: str = "worker"):
        self.name = name
        tag = secrets.token_hex(2)
        self.netns = f"harness-{name}-{tag}"
        self.host_if, self.ns_if = f"hxh{tag}", f"hxn{tag}"  # veth names: at most 15 characters
        self.data_root = DATA_ROOT / name
        self.run_dir = Path(tempfile.mkdtemp(prefix=f"harness-engine-{name}-"))
        self.certs = self.run_dir / "certs"
        self.socket = self.run_dir / "docker.sock"
        self.pidfile = self.run_dir / "docker.pid"
        self.log = self.run_dir / "dockerd.log"
        self.proc: subprocess.Popen | None = None
        self.subnet: ipaddress.IPv4Network | None = None
        # Another test process (an xdist worker, another checkout's suite) with an engine of this name waits.
        self._owner = machine_lock(f"engine-{name}", timeout=1800)

    # -- addresses ----------------------------------------------------------------------------
    @property
    def host_addr(self) -> str:
        """The host's end of the veth pair (where the namespace reaches the host engine)."""
        return str(self.subnet.network_address + 1)

    @property
    def addr(self) -> str:
        """The engine's address, seen from the host."""
        return str(self.subnet.network_address + 2)

    @property
    def unix_url(self) -> str:
        return f"unix://{self.socket}"

    @property
    def tls_url(self) -> str:
        return f"tcp://{self.addr}:2376"

    def docker(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
        """The docker CLI against this engine (over its unix socket)."""
        return subprocess.run(["docker", "-H", self.unix_url, *args], check=check, capture_output=True,
                              text=True, timeout=timeout)

    def client(self):
        import docker

        return docker.DockerClient(base_url=self.unix_url, version="auto", timeout=120)

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self, timeout: float = 60) -> SecondEngine:
        if os.geteuid() != 0:
            raise RuntimeError("a second engine needs root (network namespaces)")
        self._owner.acquire()  # its data root: one engine of this name on the machine at a time
        try:
            with machine_lock("subnet"):  # another engine starting at the same time must not pick it too
                self.subnet = free_subnet()
                _run("ip", "netns", "add", self.netns)
                self._network()
            make_certs(self.certs, self.addr)
            self._dockerd()
            self._wait(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _network(self) -> None:
        ns = ("ip", "netns", "exec", self.netns)
        prefix = self.subnet.prefixlen
        _run("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
        _run("ip", "link", "set", self.ns_if, "netns", self.netns)
        _run("ip", "addr", "add", f"{self.host_addr}/{prefix}", "dev", self.host_if)
        _run("ip", "link", "set", self.host_if, "up")
        _run(*ns, "ip", "addr", "add", f"{self.addr}/{prefix}", "dev", self.ns_if)
        _run(*ns, "ip", "link", "set", "lo", "up")
        _run(*ns, "ip", "link", "set", self.ns_if, "up")
        _run(*ns, "ip", "route", "add", "default", "via", self.host_addr)
        etc = Path("/etc/netns") / self.netns
        etc.mkdir(parents=True, exist_ok=True)
        (etc / "resolv.conf").write_text("nameserver 127.0.0.1\n")

    def _dockerd(self) -> None:
        self.data_root.mkdir(parents=True, exist_ok=True)
        # The data root persists between sessions (its images are worth keeping), but its network store and
        # swarm state belong to engines that are gone: a swarm network a killed session left instantiated there
        # claims its bridge name, and the next swarm's network of the same bridge is then refused on this node
        # ("networks have same bridge name"). Each start begins with neither; tests make what they need.
        (self.data_root / "network" / "files" / "local-kv.db").unlink(missing_ok=True)
        shutil.rmtree(self.data_root / "swarm", ignore_errors=True)
        # The engine's own bridge: a /24 next to the veth's (10.213.N.0 -> 10.214.N.0), never docker0's.
        octets = str(self.subnet.network_address).split(".")
        bridge = f"{octets[0]}.{int(octets[1]) + 1}.{octets[2]}.1/24"
        mounts = "mount -t tmpfs cgroup /sys/fs/cgroup\n" + "".join(
            f"mkdir -p /sys/fs/cgroup/{c} && mount -t cgroup -o {c} cgroup /sys/fs/cgroup/{c}\n" for c in CGROUPS
        ) + "mkdir -p /sys/fs/cgroup/systemd && mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd\n"
        c = self.certs
        script = mounts + " ".join([
            "exec dockerd", f"--data-root {self.data_root}", f"--exec-root {self.run_dir}/exec",
            f"--pidfile {self.pidfile}", f"-H {self.unix_url}", f"-H tcp://{self.addr}:2376",
            f"--tlsverify --tlscacert {c}/ca.pem --tlscert {c}/server-cert.pem --tlskey {c}/server-key.pem",
            f"--bip {bridge}", "--exec-opt native.cgroupdriver=cgroupfs",
        ])
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(["ip", "netns", "exec", self.netns, "sh", "-ec", script],
                                         stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)

    def _wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"second dockerd exited ({self.proc.returncode}):\n{self.log.read_text()[-3000:]}")
            try:
                if self.docker("info", check=False, timeout=10).returncode == 0:
                    return
            except subprocess.TimeoutExpired:
                pass  # still starting (e.g. catching up on state in its data root)
            time.sleep(0.5)
        raise RuntimeError(f"second dockerd did not answer in {timeout}s:\n{self.log.read_text()[-3000:]}")

    def load_image(self, tag: str) -> None:
        """Copy an image of the host engine into this one (skipped when present): ~30 s for the sandbox image."""
        if self.docker("image", "inspect", tag, check=False).returncode == 0:
            return
        with machine_lock("disk"):
            save = subprocess.Popen(["docker", "save", tag], stdout=subprocess.PIPE)
            try:
                subprocess.run(["docker", "-H", self.unix_url, "load", "-q"], stdin=save.stdout, check=True,
                               capture_output=True, timeout=600)
            finally:
                save.stdout.close()
                save.wait()
        if save.returncode != 0:
            raise RuntimeError(f"docker save {tag} failed")

    def stop(self) -> None:
        """Stop the engine (its containers die with it) and remove the namespace and the veth pair."""
        if self.proc is not None and self.proc.poll() is None:
            pid = int(self.pidfile.read_text()) if self.pidfile.exists() else self.proc.pid
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        _run("ip", "netns", "del", self.netns, check=False)
        _run("ip", "link", "del", self.host_if, check=False)  # gone with the namespace's end already, usually
        shutil.rmtree(Path("/etc/netns") / self.netns, ignore_errors=True)
        shutil.rmtree(self.run_dir, ignore_errors=True)
        if self._owner.is_locked:
            self._owner.release()

    def __enter__(self) -> SecondEngine:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
