"""The tool-family registry (harness/environments/family.py): the families' tools in their fixed order, what
each needs in the sandbox image, and a family added in one module (tests/helpers/checksum_family.py) that
reaches the model end to end through both runners and the dry preflight."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from harness.agents.contract import Limits
from harness.agents.dry import dry_environments
from harness.datasets.model import Instance
from harness.environments.families import check_run, families, start_run
from harness.environments.family import _REGISTERED, RunSetup, ToolFamily
from harness.environments.tools import sandbox_tools, web_tools
from harness.environments.websearch.settings import SearchSettings
from harness.errors import InputError
from harness.models.config import ModelSection
from harness.sandbox.contract import SandboxSpec
from tests.fakes.openai_server import FakeOpenAI, text, tool_calls
from tests.helpers.e2e import REPO, explain, fake_config, harness, rows, trace

CODE_AND_FILES = ["run_python", "run_shell", "list_files", "read_file", "find_in_file"]
BROWSER = ["visit_url", "read_page", "page_down", "page_up", "find_on_page", "click", "type_text", "go_back",
           "download_file", "screenshot"]


def names(tools) -> list[str]:
    return [t.__name__ for t in tools]


def test_every_tool_in_its_place_kit_by_kit(tmp_path):
    """The order the model sees (recorded replays depend on it): the code and file tools, then each
    family's that is offered, then the browser's."""
    section = ModelSection(name="m", model="x", transcription_model="whisper-1", model_info={"vision": True})
    rag = Instance(instance_id="b", question="q", root=tmp_path, files=["c.json"], metadata={"corpus": "c.json"})
    envs = dry_environments(Limits(), section, SearchSettings(provider="tavily"), rag)
    assert names(sandbox_tools(envs, rag)) == CODE_AND_FILES + [
        "view_image", "fetch_url", "video_frames", "transcribe_audio", "web_search", "search_corpus"]
    assert names(web_tools(envs)) == BROWSER
    bare = dry_environments(Limits())
    assert names(sandbox_tools(bare)) == CODE_AND_FILES + ["fetch_url", "video_frames"]
    assert names(web_tools(bare)) == BROWSER


def _apt_packages(dockerfile: str) -> set[str]:
    install = re.search(r"apt-get install -y --no-install-recommends \\\n(.*?)&&", dockerfile, re.S)
    assert install, "the sandbox image's apt-get install line moved: update this test"
    return set(install.group(1).replace("\\", " ").split())


def _pip_packages(requirements: str) -> set[str]:
    return {re.split(r"[\[<>=~!; ]", line.strip(), maxsplit=1)[0].lower()
            for line in requirements.splitlines() if line.strip() and not line.startswith("#")}


def test_the_sandbox_image_carries_what_every_family_needs():
    images = REPO / "images" / "sandbox"
    apt = _apt_packages((images / "Dockerfile").read_text())
    pip = _pip_packages((images / "requirements.txt").read_text())
    for family in families():
        assert set(family.needs.apt) <= apt, (family.name, set(family.needs.apt) - apt)
        assert set(family.needs.pip) <= pip, (family.name, set(family.needs.pip) - pip)


def test_every_familys_run_level_steps_run_in_order_each_on_the_setup_the_one_before_gave():
    """check_run / start_run (runner/phases/preflight.py and services.py): every registered family's
    `check` (its warnings said, the first InputError ends the run) and `start` (its services on the run's
    stack, stopped after the last instance), in tool order, each `start` seeing the one before's setup."""
    calls: list[tuple[str, object]] = []

    class Early(ToolFamily[None]):
        name, order = "test-early", -2

        def check(self, run: RunSetup) -> str | None:
            calls.append(("check", self.name))
            return "warning: early"

        def start(self, run: RunSetup, stack: contextlib.ExitStack) -> RunSetup:
            stack.callback(calls.append, ("stopped", self.name))
            return replace(run, search=run.search.model_copy(update={"max_results": 3}))

    class Late(ToolFamily[None]):
        name, order = "test-late", -1
        refuse = False

        def check(self, run: RunSetup) -> str | None:
            calls.append(("check", self.name))
            if self.refuse:
                raise InputError("test-late cannot work")
            return None

        def start(self, run: RunSetup, stack: contextlib.ExitStack) -> RunSetup:
            calls.append(("start saw max_results", run.search.max_results))
            return run

    run = RunSetup(provider=None, spec=SandboxSpec(image="i", run_id="r", instance_id="run"),  # type: ignore[arg-type]
                   instance=None, run_dir=Path("."), search=SearchSettings())
    try:
        assert check_run(run) == ["warning: early"]
        with contextlib.ExitStack() as stack:
            started = start_run(run, stack)
            assert started.search.max_results == 3 and run.search.max_results != 3
            assert ("stopped", "test-early") not in calls
        assert calls[:2] == [("check", "test-early"), ("check", "test-late")]
        assert calls[2:] == [("start saw max_results", 3), ("stopped", "test-early")]
        Late.refuse = True
        with pytest.raises(InputError, match="test-late cannot work"):
            check_run(run)
    finally:
        _REGISTERED.pop("test-early", None)
        _REGISTERED.pop("test-late", None)


def test_a_family_of_one_module_is_offered_where_it_says():
    from tests.helpers import checksum_family

    asked = Instance(instance_id="a", question="q", root=Path("."), metadata={"checksums": True})
    other = Instance(instance_id="b", question="q", root=Path("."))
    assert "checksum" in [f.name for f in families()]  # registered by its definition
    offered = names(sandbox_tools(dry_environments(Limits(), instance=asked), asked))
    assert offered == CODE_AND_FILES + ["fetch_url", "video_frames", "file_sha256"]
    assert "file_sha256" not in names(sandbox_tools(dry_environments(Limits(), instance=other), other))
    assert checksum_family.Checksum.needs.apt == ("coreutils",)


@pytest.mark.docker
@pytest.mark.parametrize("agent", ["PlainRunner", "assistant"])
def test_a_family_of_one_module_reaches_the_model_through_a_real_runner(tmp_path, image, out, agent):
    """The plain and the AutoGen runner, in real sandboxes, against the fake OpenAI server: the instance that
    asks for checksums gets file_sha256 in its place (and the preflight's request with it), the tool runs in
    the sandbox and is traced; the other instance is not offered it."""
    payload = b"one module, one family\n"
    (tmp_path / "data.txt").write_bytes(payload)
    digest = hashlib.sha256(payload).hexdigest()
    data = tmp_path / "tasks.jsonl"
    data.write_text(json.dumps({"instance_id": "a-sums", "question": "What is the SHA-256 of data.txt?",
                                "answer": digest, "files": ["data.txt"], "checksums": True}) + "\n"
                    + json.dumps({"instance_id": "b-plain", "question": "Say hi.", "answer": "hi"}) + "\n")
    script = [tool_calls(("file_sha256", {"path": "data.txt"})), text(f"<solution>{digest}</solution>"),
              text("<solution>hi</solution>")]
    with FakeOpenAI(script) as server:
        proc = harness("run", "--dataset", data, "--model", "fake", "--config",
                       fake_config(tmp_path / "m.toml", server.base_url), "--output-dir", out,
                       "--agent", f"tests.helpers.checksum_family:{agent}", "--workers", 1,
                       "--instance-timeout", 120)
    assert proc.returncode == 0, explain(proc)
    by_id = {row["instance_id"]: row for row in rows(out)}
    assert by_id["a-sums"]["correct"] is True and by_id["a-sums"]["tool_calls"] == ["file_sha256"], by_id["a-sums"]
    assert by_id["b-plain"]["correct"] is True and by_id["b-plain"]["tool_calls"] == [], by_id["b-plain"]

    def offered(request: dict) -> list[str]:
        return [t["function"]["name"] for t in request["json"].get("tools", [])]

    expected = CODE_AND_FILES + ["fetch_url", "video_frames", "file_sha256"] + BROWSER
    (preflight,) = server.probes
    assert offered(preflight) == expected  # the dry preflight built the first instance's tools
    first, second, third = server.chat_requests
    assert offered(first) == offered(second) == expected
    assert offered(third) == [n for n in expected if n != "file_sha256"]
    (result,) = [m for m in second["json"]["messages"] if m["role"] == "tool"]
    assert result["content"] == digest
    (env,) = [e for e in trace(out, by_id["a-sums"]) if e["type"] == "env"]
    assert env["env"] == "checksum" and env["action"] == "file_sha256" and env["outcome"] == "ok"


def test_every_toolbox_package_is_pinned_so_an_image_built_another_day_is_the_same():
    """images/sandbox/constraints.txt pins each requirement (a new lxml broke .docx reading in a fresh build)."""
    images = REPO / "images" / "sandbox"
    norm = lambda name: re.sub(r"[-_.]+", "-", name)  # noqa: E731 - PEP 503
    pinned = {norm(line.split("==")[0].lower()) for line in (images / "constraints.txt").read_text().splitlines()
              if "==" in line and not line.startswith("#")}
    assert {norm(p) for p in _pip_packages((images / "requirements.txt").read_text())} <= pinned
    assert "-c /tmp/build/constraints.txt" in (images / "Dockerfile").read_text()


def test_every_package_of_the_gaia2_image_is_pinned():
    """images/gaia2: ARE exactly, and each package of its virtual environment by the constraints (a pip freeze made
    with the sandbox's own Python): nothing of it is resolved anew on another day."""
    images = REPO / "images" / "gaia2"
    lines = [line for line in (images / "constraints.txt").read_text().splitlines() if line and not line[0] == "#"]
    assert len(lines) > 50 and all(re.fullmatch(r"[A-Za-z0-9_.\-]+==[^=\s]+", line) for line in lines), lines
    dockerfile = (images / "Dockerfile").read_text()
    assert "meta-agents-research-environments==1.2.0 -c /tmp/build/constraints.txt" in dockerfile


def test_the_fork_server_preloads_every_module_an_agent_process_imports_as_it_starts():
    """child.py's PRELOAD lists what run() imports lazily; a module left out is imported again by every agent."""
    import ast

    from harness.runner.agent_process import child

    tree = ast.parse((REPO / "harness" / "runner" / "agent_process" / "child.py").read_text())
    run = next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "run")
    lazy = {node.module for node in ast.walk(run) if isinstance(node, ast.ImportFrom) and node.module}
    assert lazy and lazy <= set(child.PRELOAD), lazy - set(child.PRELOAD)


def test_an_instance_may_restrict_its_agent_to_named_families_and_a_bad_name_is_refused_before_any_container(
        tmp_path):
    """A row's `tool_families` (Gaia2's: its apps alone) gives the agent those families' tools only; the base (code)
    is built for its sandbox and tracer all the same. A name that is no family is an input error naming the row."""
    from harness.environments.families import allowed, check_tool_families, tools
    from harness.errors import InputError

    only = Instance(instance_id="g", question="q", root=tmp_path, metadata={"tool_families": ["files"]})
    envs = dry_environments(Limits(), instance=only)
    assert allowed(only) == {"files"} and "code" in envs.built and "browser" not in envs.built
    names = {tool.__name__ for tool in tools(envs, only)}
    assert names and not names & {"run_python", "run_shell"}, names
    everything = Instance(instance_id="a", question="q", root=tmp_path)
    assert allowed(everything) is None and {"run_python", "run_shell"} <= {t.__name__ for t in tools(envs, everything)}
    check_tool_families([only, everything])
    with pytest.raises(InputError, match=r"tool_families must be a list.*typo: \['cdoe'\]"):
        check_tool_families([only, Instance(instance_id="typo", question="q", root=tmp_path,
                                            metadata={"tool_families": ["cdoe"]})])
