"""`harness smoke`: prove the sandbox stage works end to end on this engine."""

from __future__ import annotations

import hashlib
import secrets
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness.sandbox.contract import SandboxProvider, SandboxSpec


def _one(provider: SandboxProvider, image: str, run_id: str, index: int, root: Path,
         digest: str) -> tuple[str, int, float, list[str]]:
    problems: list[str] = []
    started = time.monotonic()
    with provider.open(SandboxSpec(image=image, run_id=run_id, instance_id=f"smoke {index}")) as sandbox:
        sandbox.copy_in(root, ["data.bin"])
        got = sandbox.shell("sha256sum /workspace/data.bin").stdout.split()[0]
        if got != digest:
            problems.append(f"copied file hash {got} != {digest}")
        result = sandbox.python("import pandas, openpyxl, docx, pptx, pypdf, markitdown; print('toolbox ok')")
        if "toolbox ok" not in result.stdout:
            problems.append(f"toolbox import failed: {result.stderr[-500:]}")
        if not sandbox.shell("sleep 30", timeout=0.5).timed_out:
            problems.append("timeout did not fire")
        name, port = sandbox.name, sandbox.endpoint[1]
    return name, port, time.monotonic() - started, problems


def run_smoke(provider: SandboxProvider, count: int, log=print) -> bool:
    image = provider.preflight(log=log)
    reaped = provider.cleanup()
    if reaped:
        log(f"removed {len(reaped)} orphaned sandbox(es) of dead harness processes")
    run_id = f"smoke-{secrets.token_hex(3)}"
    with tempfile.TemporaryDirectory() as tmp:
        payload = secrets.token_bytes(256 * 1024)
        Path(tmp, "data.bin").write_bytes(payload)
        digest = hashlib.sha256(payload).hexdigest()
        with ThreadPoolExecutor(count) as pool:
            results = list(pool.map(lambda i: _one(provider, image, run_id, i, Path(tmp), digest), range(count)))
    ok = True
    for name, port, seconds, problems in results:
        status = "ok" if not problems else "FAIL: " + "; ".join(problems)
        ok &= not problems
        log(f"{name} port={port} {seconds:.2f}s {status}")
    ports = [port for _, port, _, _ in results]
    if len(set(ports)) != len(ports):
        ok = False
        log(f"FAIL: ports collided: {sorted(ports)}")
    left = provider.find(run_id)
    if left:
        ok = False
        log(f"FAIL: {len(left)} container(s) of run {run_id} left behind")
    log(f"smoke {'passed' if ok else 'FAILED'}: {count} sandboxes, image {image}, containers left: {len(left)}")
    return ok
