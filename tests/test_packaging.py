"""The installed package works on its own: a wheel, installed into a fresh venv and run from
outside the repo, finds its non-Python files (the browser's page.js, the image build contexts
of the top-level images/, shipped as harness/images/) and builds the same image tag as the checkout.

The project's dependencies are borrowed from the repo's venv through a `.pth` line (no
download); that adds the directory to sys.path without running the `.pth` files inside it,
so the editable install's finder stays inert and `harness` must come from the wheel.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

from harness.sandbox.registry import get_provider

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[1]
PACKAGED = ["harness/environments/page.js", "harness/images/sandbox/Dockerfile",  # images/ ships as harness/images/
            "harness/images/sandbox/sandboxd.py", "harness/images/sandbox/requirements.txt",
            "harness/images/sandbox/constraints.txt",
            "harness/images/base/build.sh", "harness/report/templates/report.html.j2",
            "harness/report/static/report.js", "harness/report/static/report.css"]

BROWSE = """
import asyncio, sys
from harness.environments.web import WebEnv
from harness.sandbox.contract import SandboxSpec
from harness.sandbox.registry import get_provider
from harness.traces import Tracer

provider = get_provider("docker")
image = provider.preflight(log=lambda m: print("preflight:", m))
sandbox = provider.start(SandboxSpec(image=image, run_id=sys.argv[1], instance_id="packaged"))
try:
    web = WebEnv(sandbox, Tracer(None))

    async def main():
        try:
            return await web.visit("data:text/html,<title>t</title><h1>packaged ok</h1>")
        finally:
            await web.close()

    print("IMAGE", image)
    print(asyncio.run(main()))
finally:
    provider.teardown(sandbox)
"""


def run(argv, *, cwd, timeout=300, env=None) -> str:
    proc = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"{argv} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def build_wheel(tmp: Path) -> Path:
    # Build from a clean copy: an in-tree build would leave build/ in the checkout, and its
    # stale build/lib could hide a file that package-data no longer ships.
    src = tmp / "src"
    for folder in ("harness", "images"):
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    # Offline when this venv can build wheels itself; otherwise pip fetches the build backend
    # the way `pip install -e .` in scripts/setup.sh does.
    offline = any(importlib.util.find_spec(m) for m in ("wheel", "setuptools.command.bdist_wheel"))
    out = tmp / "dist"
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", out, src]
        + (["--no-build-isolation"] if offline else []), cwd=tmp)
    (wheel,) = out.glob("harness-*.whl")
    return wheel


def fresh_venv(tmp: Path, wheel: Path) -> Path:
    venv = tmp / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=tmp)
    python = venv / "bin" / "python"
    site = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=tmp).strip())
    deps = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (site / "_repo_deps.pth").write_text("".join(f"{p}\n" for p in deps))
    run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q", wheel], cwd=tmp)
    return venv


def test_wheel_installed_in_a_fresh_venv_builds_the_same_image_and_browses(tmp_path):
    wheel = build_wheel(tmp_path)
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [p for p in PACKAGED if p not in names]
    assert not missing, f"not in the wheel (package-data in pyproject.toml?): {missing}"

    venv = fresh_venv(tmp_path, wheel)
    python, cli = venv / "bin" / "python", venv / "bin" / "harness"
    work = tmp_path / "elsewhere"  # outside the repo: nothing can come from the checkout
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_IMAGES_DIR", "PYTHONPATH")}

    # The checkout's image (built if needed, as scripts/setup.sh does).
    repo_tag = run([Path(sys.executable).with_name("harness"), "images", "build"], cwd=ROOT, env=env,
                   timeout=1800).strip().splitlines()[-1]
    assert repo_tag.startswith("harness-sandbox:")

    where, context, tag = run([python, "-c", "import harness, harness.sandbox.docker.images as i; "
                               "print(harness.__file__); print(i.images_dir()); print(i.sandbox_tag())"],
                              cwd=work, env=env).split()
    assert Path(where).is_relative_to(venv) and Path(context).is_relative_to(venv), (where, context)
    # Checked before building: a different context would mean a long rebuild, then a failure.
    assert tag == repo_tag, f"packaged build context {context} differs from the checkout's"

    out = run([cli, "images", "build"], cwd=work, env=env)
    assert out.strip().splitlines() == [repo_tag], out  # found, not rebuilt

    run_id = f"test-pkg-{secrets.token_hex(4)}"
    script = tmp_path / "browse.py"
    script.write_text(textwrap.dedent(BROWSE))
    try:
        out = run([python, script, run_id], cwd=work, env=env, timeout=240)
    finally:
        get_provider("docker").cleanup(run_id=run_id)
    assert f"IMAGE {repo_tag}" in out and "preflight:" not in out, out
    assert "packaged ok" in out, out
