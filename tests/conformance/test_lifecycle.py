"""Conformance: starting, attaching, tearing down and cleaning up sandboxes, and noticing a dead one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from harness.errors import InfraError, SandboxDied
from harness.sandbox import registry
from harness.sandbox.contract import SandboxHandle
from tests.helpers.locks import machine_lock


def names(leftovers) -> set[str]:
    return {item.name for item in leftovers}


def run_python(code: str, *args: str, stdin: str = "", timeout: float = 120) -> subprocess.CompletedProcess:
    """Run code in another Python process (the project's interpreter)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], input=stdin, capture_output=True,
                          text=True, timeout=timeout)


def test_start_find_teardown_twice(provider, make_spec, run_id):
    sb = provider.start(make_spec("lifecycle"))
    try:
        found = provider.find(run_id)
        assert names(found) == {sb.name}
        assert found[0].run_id == run_id
        assert sb.shell("echo up").stdout == "up\n"
    finally:
        provider.teardown(sb)
    provider.teardown(sb)  # idempotent
    assert provider.find(run_id) == []
    with pytest.raises(SandboxDied):
        sb.shell("echo gone")


@pytest.mark.parametrize("how", [ValueError, KeyboardInterrupt])
def test_open_tears_down_on_every_way_out(provider, make_spec, run_id, how):
    with pytest.raises(how):
        with provider.open(make_spec("open")) as sb:
            assert names(provider.find(run_id)) == {sb.name}
            raise how("boom")
    assert provider.find(run_id) == []


def test_handle_round_trips_and_attaches_in_another_process(provider, make_spec):
    with provider.open(make_spec("attach")) as sb:
        handle = sb.handle()
        assert handle.provider and handle.name == sb.name
        text = handle.model_dump_json()
        assert SandboxHandle.model_validate_json(text) == handle
        sb.shell("echo from-parent > /workspace/mark")
        child = run_python("""
            import sys
            from harness.sandbox.contract import SandboxHandle
            from harness.sandbox.registry import attach
            sb = attach(SandboxHandle.model_validate_json(sys.stdin.read()))
            result = sb.shell("cat /workspace/mark && echo from-child > /workspace/reply")
            print(result.exit_code, result.stdout.strip(), sb.name)
            sb.close()
        """, stdin=text)
        assert child.returncode == 0, child.stderr[-3000:]
        assert child.stdout.split() == ["0", "from-parent", sb.name]
        assert sb.read_file("/workspace/reply") == b"from-child\n"
        # The other process closing its side leaves the sandbox running.
        assert sb.shell("echo still").stdout == "still\n"
        # In this process too: an attached object closed does not end the sandbox.
        again = registry.attach(SandboxHandle.model_validate_json(text))
        assert again.shell("cat /workspace/reply").stdout == "from-child\n"
        again.close()
        assert sb.shell("echo alive").stdout == "alive\n"


def test_dead_sandbox_is_reported_as_sandbox_died(provider, make_spec, run_id, tmp_path):
    sb = provider.start(make_spec("dies"))
    assert sb.shell("echo hi").stdout == "hi\n"  # a live connection to go stale
    other = provider.attach(SandboxHandle.model_validate_json(sb.handle().model_dump_json()))
    provider.teardown(other)  # removed behind the original object's back
    assert provider.find(run_id) == []
    (tmp_path / "f").write_text("x")
    for call in [lambda: sb.exec(["true"]), lambda: sb.shell("echo hi"), lambda: sb.read_file("/etc/hostname"),
                 lambda: sb.copy_in(tmp_path, ["f"])]:
        with pytest.raises(SandboxDied) as err:
            call()
        assert isinstance(err.value, InfraError) and err.value.retryable
    provider.teardown(sb)  # still fine


def test_cleanup_of_one_run(provider, make_spec, run_id):
    first = provider.start(make_spec("one"))
    second = provider.start(make_spec("two"))
    assert names(provider.find(run_id)) == {first.name, second.name}
    preview = provider.cleanup(run_id=run_id, dry_run=True)
    assert {first.name, second.name} <= names(preview)
    assert names(provider.find(run_id)) == {first.name, second.name}  # a dry run removes nothing
    removed = provider.cleanup(run_id=run_id)
    assert {first.name, second.name} <= names(removed)
    assert provider.find(run_id) == []
    with pytest.raises(SandboxDied):
        first.shell("true")


OWNER = """
import sys, time
from harness.sandbox.contract import SandboxSpec
from harness.sandbox.registry import get_provider
provider = get_provider(sys.argv[1])
sb = provider.start(SandboxSpec(image=sys.argv[2], run_id=sys.argv[3], instance_id="orphan"))
print(sb.handle().model_dump_json(), flush=True)
time.sleep(600)
"""


def test_cleanup_removes_orphans_of_a_dead_owner_and_spares_live_ones(provider, image, make_spec, run_id):
    with machine_lock("reap"):  # no other test reaps the orphan first (tests/helpers/locks.py)
        mine = provider.start(make_spec("live-owner"))  # this process is alive: never an orphan
        child = subprocess.Popen([sys.executable, "-c", OWNER, registry_name(provider), image, run_id],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = child.stdout.readline()
            assert line, child.stderr.read() if child.poll() is not None else "the child printed nothing"
            orphan = SandboxHandle.model_validate_json(line)
            assert names(provider.find(run_id)) == {mine.name, orphan.name}
            assert provider.cleanup() is not None
            assert orphan.name in names(provider.find(run_id))  # its owner is alive: not an orphan yet
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
            child.stdout.close()
            child.stderr.close()
        removed = provider.cleanup()
        assert orphan.name in names(removed) and mine.name not in names(removed)
        assert names(provider.find(run_id)) == {mine.name}
        assert mine.shell("echo spared").stdout == "spared\n"
        with pytest.raises(SandboxDied):
            provider.attach(orphan).shell("true")
        provider.teardown(mine)


def registry_name(provider) -> str:
    """The name the registry knows this provider by (a registered name, or module:Class)."""
    for name, target in registry.PROVIDERS.items():
        module, _, cls = target.partition(":")
        if type(provider).__module__ == module and type(provider).__name__ == cls:
            return name
    return f"{type(provider).__module__}:{type(provider).__name__}"
