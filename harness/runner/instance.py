"""One instance, start to finish: sandbox -> agent process -> answer -> score -> result row.

Infrastructure failures are retried on a fresh sandbox with backoff; agent and
model errors are recorded, not retried. Every path ends in exactly one ResultRow.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Executor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from harness.agents.base import Limits
from harness.answers import extract_answer
from harness.datasets.model import Instance
from harness.environments.trace import read_trace
from harness.errors import HarnessError, InfraError
from harness.models.config import ModelSection
from harness.results.model import ResultRow, Usage
from harness.runner.child import ChildRequest, ChildResult
from harness.runner.prompt import instruction
from harness.sandbox.contract import SandboxSpec
from harness.sandbox.docker.naming import slug
from harness.sandbox.docker.provider import DockerSandbox, start, teardown
from harness.scoring.base import ScoreContext

log = logging.getLogger(__name__)
# Backoff between infrastructure retries: the engine is often just overloaded.
RETRY_BACKOFF_S = float(os.environ.get("HARNESS_RETRY_BACKOFF", 2.0))


@dataclass
class RunSettings:
    run_id: str
    image: str
    agent: str
    model: ModelSection
    limits: Limits
    output_dir: Path
    scorers: list = field(default_factory=list)  # Scorer objects; the first gives `correct`
    max_retries: int = 2
    sandbox: dict = field(default_factory=dict)  # extra SandboxSpec fields (memory, cpus, network...)
    record: bool = False
    # Where sandboxes are removed. Removing a container whose Chromium ran takes ~4 s here
    # (the engine tears down its memory cgroup), so a run removes them on a background pool
    # and waits for it before its leak audit; None removes them in the worker itself.
    reaper: Executor | None = None


@contextmanager
def _sandbox(spec: SandboxSpec, reaper: Executor | None) -> Iterator[DockerSandbox]:
    """A sandbox removed on every way out; by the reaper when there is one."""
    sandbox = start(spec)
    try:
        yield sandbox
    finally:
        if reaper is None:
            _teardown_logged(sandbox)
        else:
            try:
                reaper.submit(_teardown_logged, sandbox)
            except RuntimeError:  # the pool is shutting down (Ctrl-C): remove it here
                _teardown_logged(sandbox)


def _teardown_logged(sandbox: DockerSandbox) -> None:
    """A failed removal must not cost the instance its result: log it; the leak audit counts it."""
    try:
        teardown(sandbox)
    except Exception as exc:  # noqa: BLE001
        log.warning("could not remove sandbox %s: %s", sandbox.name, exc)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _trace_name(instance: Instance, attempt: int) -> str:
    digest = hashlib.sha256(instance.instance_id.encode()).hexdigest()[:8]
    return f"traces/{slug(instance.instance_id, 60)}-{digest}-a{attempt}.jsonl"


_live: set[subprocess.Popen] = set()
_live_lock = threading.Lock()
_stopping = threading.Event()


def kill_agents() -> None:
    """Kill every running agent process and start no more (Ctrl-C); sandboxes are still removed."""
    with _live_lock:
        _stopping.set()
        for proc in list(_live):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _run_child(request: ChildRequest, timeout: float | None) -> tuple[ChildResult, bool]:
    """Run the agent process; kill it (whole group) at the wall-clock limit."""
    with tempfile.TemporaryDirectory(prefix="harness-child-") as tmp:
        req_path, res_path = Path(tmp, "request.json"), Path(tmp, "result.json")
        req_path.write_text(request.model_dump_json())
        with _live_lock:
            if _stopping.is_set():
                return ChildResult(error_kind="infra", error="cancelled (Ctrl-C)"), False
            proc = subprocess.Popen([sys.executable, "-m", "harness.runner.child", str(req_path), str(res_path),
                                     str(os.getpid())], start_new_session=True, stdout=subprocess.DEVNULL,
                                    stderr=open(Path(tmp, "stderr"), "wb"))
            _live.add(proc)
        killed = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            killed = True
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            with _live_lock:
                _live.discard(proc)
        if res_path.exists():
            return ChildResult.model_validate_json(res_path.read_text()), killed
        if killed:
            return ChildResult(limit="wall_time"), True
        stderr = Path(tmp, "stderr").read_text(errors="replace")[-3000:]
        return ChildResult(error_kind="agent", error=f"agent process exited {proc.returncode}: {stderr}"), False


def _salvage(result: ChildResult, trace_path: Path, *, usage_too: bool = True) -> ChildResult:
    """Recover the last message and tool calls (and, after a kill, usage) from the trace."""
    usage, last_text, tools = Usage(), "", []
    for event in read_trace(trace_path):
        if event.get("type") == "llm_call":
            usage.llm_calls += 1
            usage.prompt_tokens += event.get("usage", {}).get("prompt_tokens", 0)
            usage.completion_tokens += event.get("usage", {}).get("completion_tokens", 0)
        elif event.get("type") == "message":
            message = event["message"]
            if message.get("type") == "ToolCallRequestEvent":
                tools += [c.get("name") for c in message.get("content", [])]
            elif isinstance(message.get("content"), str) and message.get("source") != "user":
                last_text = message["content"]
    if usage_too:
        result.usage = usage
    result.final_message = result.final_message or last_text
    result.tool_calls = result.tool_calls or tools
    return result


def run_instance(instance: Instance, settings: RunSettings) -> ResultRow:
    """Never raises (but for KeyboardInterrupt): a bug here must cost one row, not the run."""
    started, t0 = _now(), time.monotonic()
    try:
        return _run_instance(instance, settings, started, t0)
    except Exception as exc:  # noqa: BLE001
        result = ChildResult(error_kind="infra", error=f"harness failure: {type(exc).__name__}: {exc}")
        return _finish(instance, settings, result, 1, started, t0, None, None)


def _run_instance(instance: Instance, settings: RunSettings, started: str, t0: float) -> ResultRow:
    task = instruction(instance)
    result, sandbox_name, trace_rel, attempt = ChildResult(), None, None, 0
    spent = Usage()  # every attempt's tokens count, not just the last one's
    for attempt in range(1, settings.max_retries + 2):
        if _stopping.is_set():
            result = ChildResult(error_kind="infra", error="cancelled (Ctrl-C)")
            break
        trace_rel = _trace_name(instance, attempt)
        trace_path = settings.output_dir / trace_rel
        trace_path.parent.mkdir(parents=True, exist_ok=True)
        trace_path.unlink(missing_ok=True)
        spec = SandboxSpec(image=settings.image, run_id=settings.run_id, instance_id=instance.instance_id,
                           attempt=attempt, **settings.sandbox)
        try:
            with _sandbox(spec, settings.reaper) as sandbox:
                sandbox_name = sandbox.name
                sandbox.copy_in(instance.root, instance.files)
                host, port = sandbox.endpoint
                request = ChildRequest(
                    instance=instance, task=task, agent=settings.agent, model=settings.model.model_dump(),
                    limits=settings.limits.__dict__, trace_path=str(trace_path), record=settings.record,
                    sandbox={"spec": spec.model_dump(), "container_id": sandbox.id, "name": sandbox.name,
                             "host": host, "port": port, "token": sandbox.service.token})
                result, killed = _run_child(request, settings.limits.instance_timeout)
                if killed:
                    result = _salvage(result, trace_path)
                    result.limit = "wall_time"
                elif result.limit or result.error_kind:
                    result = _salvage(result, trace_path, usage_too=False)
        except InfraError as exc:
            result = ChildResult(error_kind=exc.kind, error=str(exc))
        except HarnessError as exc:  # input errors (e.g. refused files): recorded, not retried
            result = ChildResult(error_kind=exc.kind, error=str(exc))
            break
        spent = _add(spent, result.usage)
        if result.error_kind != "infra" or attempt > settings.max_retries:
            break
        time.sleep(RETRY_BACKOFF_S * attempt)
    result.usage = spent
    return _finish(instance, settings, result, attempt, started, t0, sandbox_name, trace_rel)


def _add(a: Usage, b: Usage) -> Usage:
    return Usage(prompt_tokens=a.prompt_tokens + b.prompt_tokens,
                 completion_tokens=a.completion_tokens + b.completion_tokens,
                 llm_calls=a.llm_calls + b.llm_calls, cost=a.cost + b.cost)


def _finish(instance, settings, result: ChildResult, attempt, started, t0, sandbox_name, trace_rel) -> ResultRow:
    answer, source = extract_answer(result.final_message)
    status = "error" if result.error_kind else ("limit" if result.limit else "ok")
    context = ScoreContext(tool_calls=result.tool_calls, total_tokens=result.usage.total_tokens,
                           max_tokens=settings.limits.max_tokens, steps=result.usage.llm_calls,
                           max_steps=settings.limits.max_steps, question=instance.question)
    scores, correct = {}, None
    if status != "error" and instance.answer is not None:
        for scorer in settings.scorers:
            try:
                score = scorer.score(answer, instance.answer, context=context)
            except Exception as exc:  # noqa: BLE001 - a scorer's failure never costs the agent's result
                scores[scorer.name] = {"scorer": scorer.name, "correct": None, "value": 0.0,
                                       "explanation": f"scorer error: {exc}"}
                continue
            scores[scorer.name] = score.model_dump()
        if settings.scorers:
            correct = scores.get(settings.scorers[0].name, {}).get("correct")
    return ResultRow(
        instance_id=instance.instance_id, attempt=attempt, status=status, error_kind=result.error_kind,
        error=result.error, limit=result.limit, answer=answer, answer_source=source, target=instance.answer,
        level=instance.level, correct=correct if status != "error" else False, scores=scores,
        usage=result.usage, steps=result.usage.llm_calls, tool_calls=result.tool_calls,
        duration_s=round(time.monotonic() - t0, 3), started_at=started, finished_at=_now(),
        sandbox=sandbox_name, trace=trace_rel,
    )
