"""gaia2_driver: one Gaia2 scenario of ARE (Meta's Agents Research Environments), served over MCP on stdio.

Runs inside the Gaia2 sandbox with ARE's own interpreter, `/opt/are/bin/python`, never in the harness:

    gaia2_driver.py SCENARIO_JSON [--judge hard|llm] [--judge-model NAME] [--noise] [--a2a]
                    [--run-number N] [--trace PATH]

It imports the scenario as ARE's benchmark runner does (JsonScenarioImporter, then preprocess_scenario: the
oracle run and the judge), starts ARE's Environment (its event loop and simulated clock, in a thread of this
process) and serves, to one MCP client:
- every app tool of the scenario, under ARE's own name (`Emails__send_email`) and description, with the JSON
  schema of the pydantic model ARE validates its arguments with (ARE's own MCP server advertises Python type
  strings instead). The AgentUserInterface's read tools are hidden, as ARE's default agent hides them: the
  user's replies arrive as notifications.
- after each call, the notifications ARE delivered since the last one, as ARE's default agent reads them
  (`[notification] TYPE: text`).
- `AgentUserInterface__send_message_to_user` ends a turn. When the scenario has another, the call waits (up to
  TURN_WAIT_S) for ARE's online judge of that turn and the user's next message, and returns it; after the last
  turn it says the task is over.
- hidden tools (prefix `harness__`, for the harness, never offered to a model): `harness__task` (the first user
  message), `harness__event` (a completed event's time and return value: the oracle agent resolves `{{id}}`
  placeholders with it), `harness__finish` (ARE's verdict, once: the env is paused, judged and stopped), and
  `harness__pause` / `harness__resume {offset}`: the harness holds the simulated clock while its model generates
  and moves it on by the call's seconds, as ARE's own agents do (`pause_env` / `resume_env` with the
  "measured" simulated generation time); events due meanwhile fire at the resume.

`--noise` runs Gaia2's noise phase as ARE's gaia2-submit does (its `create_noise_configs`): ARE's tool
augmentation (each app tool fails with ARE's probability; tool names and descriptions replaced where the
scenario's augmentation data maps them) and 10 extra environment events a minute (seed 0) from the scenario's
augmentation data.

`--a2a` runs Gaia2's agent2agent phase as ARE's runner does (`ScenarioRunnerConfig(a2a_app_prop=1.0)`, its
`_apply_a2a_config` between the Environment's creation and its run): every app but AgentUserInterface, SystemApp
and InternalContacts becomes an app agent of ARE's (its default JSON ReAct app agent over the app's tools), and
the tools served are theirs (`Emails__expert_agent`). Each of an app agent's model calls is an MCP sampling
request whose metadata says {"harness": "a2a"}, answered on the host with the agent's own model; ARE judges the
run as any other (the app agents' write actions are the agent's events).

Judges: `hard` (ARE's scripted checks only: no LLM; the arguments ARE compares with an LLM, such as a message's
text, are then not compared at all) or `llm` (ARE's GraphPerEventJudge, its soft checks asked of the MCP client:
each of the judge's calls is an MCP sampling request, which the harness answers on the host with the run's
judge model, so no key and no network reach this sandbox; ARE calls it only when an argument differs from the
oracle's after normalisation). The reply reaches ARE's checkers as the model wrote it, as gaia2-cli's judge
engine passes it: ARE 1.2.0's LiteLLMEngine lower-cases True and False in every reply, after which the
checkers that look for `[[True]]` (sanity, signature, tone, cab) can never pass.
A judge that raises, a judge call that failed, and an event loop that died are a verdict of `error`, never a
failed scenario.

`--trace PATH`: once judged (`harness__finish`), the run is exported as ARE's runner exports it
(JsonScenarioExporter, the "hf" format: the scenario with its apps, its completed events and the verdict's
decision, `--run-number` as its run_number), gzipped, to PATH in this sandbox: the file ARE's leaderboard rows
carry in their `data` column and `are-benchmark judge` re-judges offline. Its `events` are the scenario's as
given: ARE's exporter writes them as the run left them, with the turn triggers ARE's online judge added (a
ConditionCheckEvent each check re-schedules under a new id), which ARE's importer cannot read back ("got 3 events,
expected 6", then "only one branch of the events graph should contain send_message_to_agent"). The harness copies
it beside the run's trace (harness/benchmarks/gaia2/record.py); the verdict says its size or why it could not be
exported (`are_trace`).

A scenario ARE cannot set up (its importer refuses it, its oracle run fails, its judge cannot initialise: a Contacts
app with no user) is found here at start-up, before the agent's first turn: ARE's preprocessing runs the oracle
and initialises the judge's state before anything is served. The driver then serves the hidden tools alone, and
`harness__setup` (the harness's first call) says why, in ARE's words (`{"refused": "..."}`, else `{"refused":
null}`): the harness makes it the instance's input error, never retried.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import gzip
import json
import logging
import os
import re
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import mcp.types as types
from are.simulation.agents.llm.llm_engine import LLMEngine, LLMEngineException
from are.simulation.agents.llm.llm_engine_builder import LLMEngineBuilder
from are.simulation.apps.agent_user_interface import AgentUserInterface
from are.simulation.apps.mcp.server.are_simulation_mcp_server import ARESimulationToolManager
from are.simulation.data_handler.importer import JsonScenarioImporter
from are.simulation.environment import Environment, EnvironmentConfig
from are.simulation.notification_system import MessageType, VerboseNotificationSystem, VerbosityLevel
from are.simulation.scenarios.scenario_imported_from_json.utils import preprocess_scenario
from are.simulation.scenarios.utils.turn_conditions import is_send_message_to_user
from are.simulation.types import EnvironmentState, EventType
from are.simulation.utils import make_serializable
from are.simulation.validation.base import BaseJudge
from are.simulation.validation.configs import ScriptedGraphPerEventJudgeConfig
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

HIDDEN = {"AgentUserInterface__get_last_message_from_user", "AgentUserInterface__get_last_message_from_agent",
          "AgentUserInterface__get_last_unread_messages", "AgentUserInterface__get_all_messages"}
SEND_TO_USER = "AgentUserInterface__send_message_to_user"
TURN_WAIT_S = 60.0
LLM_CALL_S = 300.0  # one call of the judge or an app agent through the host, its retries included
LLM_MAX_TOKENS = 4096
ROLES = {"tool-response": "user", "tool-call": "assistant"}  # ARE's agents' own roles, as its LiteLLM engine sends them


class _NoLLM:
    """The hard judge's engine: never called (passing one keeps ARE from building a default that imports litellm)."""

    model_name = "none"

    def __call__(self, *args, **kwargs):
        raise RuntimeError("the hard judge calls no LLM")


class HostLLM(LLMEngine):
    """An LLM engine of ARE's answered by the MCP client (the harness) through sampling requests on this server's
    session, from whichever thread ARE calls it in (its event loop's for a turn's judge, a worker's for the last
    turn's and for an app agent's). `purpose` goes in each request's metadata ({"harness": "judge"} or
    {"harness": "a2a"}): the harness answers the judge's with the run's judge model, an app agent's with the
    agent's own. A failed judge call is kept (`errors`): the verdict is then an error, never a fail."""

    session: Any = None  # the server's session and its event loop, kept at the first tool call (`serve`)
    loop: asyncio.AbstractEventLoop | None = None
    errors: list[str] = []

    def __init__(self, model_name: str, purpose: str = "judge"):
        super().__init__(model_name)
        self.purpose = purpose

    def chat_completion(self, messages, stop_sequences=[], **kwargs):  # noqa: B006 - ARE's own signature
        system = "\n\n".join(str(m["content"]) for m in messages if m["role"] == "system")
        roles = [(_role(m["role"]), m["content"]) for m in messages]
        asked = [types.SamplingMessage(role=role, content=types.TextContent(type="text", text=_text(content)))
                 for role, content in roles if role in ("user", "assistant")]
        if self.session is None or self.loop is None:
            raise LLMEngineException("no MCP client to ask")
        judging = self.purpose == "judge"
        try:
            future = asyncio.run_coroutine_threadsafe(self.session.create_message(
                asked, max_tokens=LLM_MAX_TOKENS, system_prompt=system or None, temperature=0.0 if judging else None,
                stop_sequences=list(stop_sequences or ()) or None, metadata={"harness": self.purpose}), self.loop)
            result = future.result(LLM_CALL_S)
        except Exception as exc:  # noqa: BLE001 - kept: the verdict is then an error, not a fail
            error = f"{'a judge' if judging else 'an app agent'}'s call through the harness failed: " \
                    f"{type(exc).__name__}: {exc}"
            if judging:
                HostLLM.errors.append(error)
            raise LLMEngineException(error) from exc
        text = result.content.text if isinstance(result.content, types.TextContent) else ""
        for stop in stop_sequences or ():
            text = text.split(stop)[0]
        return text, {"model": result.model}


class HostEngines(LLMEngineBuilder):
    """ARE's engine builder for its app agents (agent2agent): each engine asks the harness (`HostLLM`, "a2a")."""

    def create_engine(self, engine_config, mock_responses=None):
        return HostLLM(engine_config.model_name or "agent", "a2a")


def _role(role: Any) -> str:
    """A message's role as the chat API names it (ARE's are a str enum, its tool roles its own)."""
    role = str(getattr(role, "value", role))
    return ROLES.get(role, role)


def _text(content: Any) -> str:
    return content if isinstance(content, str) else json.dumps(content, default=str)


def _judge_config(judge: str, model: str | None):
    if judge == "hard":
        return ScriptedGraphPerEventJudgeConfig(event_id_to_checker_params={}, engine=_NoLLM())
    from are.simulation.validation.configs import GraphPerEventJudgeConfig

    return GraphPerEventJudgeConfig(engine=HostLLM(model or "judge"))


def _agent2agent(scenario, env):
    """Gaia2's agent2agent phase as ARE's runner makes it (`a2a_app_prop` 1.0): every app but the user's
    interface, SystemApp and InternalContacts becomes an AppAgent of ARE's default app agent, its one tool
    (`expert_agent`) handing a task to a ReAct agent over the app's tools, whose model is asked of the harness."""
    from are.simulation.agents.agent_builder import AppAgentBuilder
    from are.simulation.agents.agent_config_builder import AppAgentConfigBuilder
    from are.simulation.scenario_runner import _apply_a2a_config
    from are.simulation.scenarios.config import ScenarioRunnerConfig

    config = ScenarioRunnerConfig(a2a_app_prop=1.0, model="agent", model_provider="harness")
    return _apply_a2a_config(config, scenario, env, AppAgentConfigBuilder(), AppAgentBuilder(HostEngines()))


def _speed_up_judge_init() -> None:
    """Building the judge renders ~4,100 static prompt templates (2-6 s of CPU); each is a pure function of its
    template and arguments, so it is rendered once."""
    from are.simulation.validation.utils import llm_utils

    render = llm_utils.jinja_format

    @functools.lru_cache(maxsize=8192)
    def cached(template, skip_validation, items):
        return render(template, skip_validation=skip_validation, **dict(items))

    def jinja_format(template, skip_validation=True, **kwargs):
        try:
            return cached(template, skip_validation, tuple(sorted(kwargs.items())))
        except TypeError:  # an argument that cannot be hashed
            return render(template, skip_validation=skip_validation, **kwargs)

    llm_utils.jinja_format = jinja_format


def _guard_turn_judge() -> None:
    """ARE judges a turn inside its event loop's thread: a judge that raises (its LLM unreachable) kills that
    thread and leaves the env paused for good. Here the turn is rejected (ARE then stops the env) and the error is
    kept for the verdict."""
    judge_turn = BaseJudge.trigger_condition

    def trigger_condition(self, env, turn_idx):
        try:
            return judge_turn(self, env, turn_idx)
        except Exception as exc:  # noqa: BLE001 - becomes the verdict's error
            self.harness_error = f"judging turn {turn_idx} raised {type(exc).__name__}: {exc}"
            return False, {}

    BaseJudge.trigger_condition = trigger_condition


class Refused(Exception):
    """ARE cannot set the scenario up: its reason, in its words (`harness__setup`)."""


@contextlib.contextmanager
def _refusing(step: str):
    """What ARE raises in `step` is the scenario's: Refused, saying the step, ARE's error and the chain of ARE's
    functions that raised it. Memory running out is not the scenario's: it goes on up (the driver dies: infra)."""
    try:
        yield
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - any of ARE's errors here is the scenario's
        frames = [f"{Path(frame.filename).stem}.{frame.name}" for frame in traceback.extract_tb(exc.__traceback__)
                  if f"{os.sep}are{os.sep}" in frame.filename]
        where = f" in {' > '.join(frames[-4:])}" if frames else ""
        raise Refused(f"{step} raised {type(exc).__name__}: {str(exc)[:2000]}{where}") from exc


class Scenario:
    """One scenario running in ARE: its tools, notifications, turns and verdict."""

    def __init__(self, path: str, judge: str, model: str | None, noise: bool = False, a2a: bool = False,
                 run_number: int | None = None, trace: str | None = None):
        _speed_up_judge_init()
        _guard_turn_judge()
        with open(path) as fh:
            text = fh.read()
        os.unlink(path)  # it holds the oracle's actions: gone before the agent's first turn, whatever its tools
        self.given_events = json.loads(text).get("events") or []  # for ARE's trace of the run (`_export`)
        with _refusing("ARE's importer"):
            scenario = JsonScenarioImporter().import_from_json_to_benchmark(text, load_completed_events=False)[0]
        augmented = {}
        if noise:
            from are.simulation.cli.utils import create_noise_configs

            tools, events = create_noise_configs()
            augmented = {"tool_augmentation_config": tools, "env_events_config": events}
        with _refusing("ARE's preprocessing (its oracle run, then its judge's initialisation)"):
            preprocess_scenario(scenario, judge_config=_judge_config(judge, model), **augmented)
        self.env = Environment(EnvironmentConfig(oracle_mode=False, duration=scenario.duration,
                                                 time_increment_in_seconds=scenario.time_increment_in_seconds,
                                                 start_time=scenario.start_time),
                               notification_system=VerboseNotificationSystem(verbosity_level=VerbosityLevel.MEDIUM))
        with _refusing("ARE's environment starting it"):
            if a2a:
                scenario = _agent2agent(scenario, self.env)
            self.env.run(scenario, wait_for_end=False)
        self.scenario, self.judge_mode, self.trace = scenario, judge, trace
        scenario.run_number = run_number  # the exported trace's, as ARE's runner numbers a scenario's runs
        apps = [app for app in scenario.apps if app.name in scenario.get_tools_by_app()]
        by_name = {tool.name: tool for app in apps for tool in app.get_tools()}
        self.tools = {t.name: (t, by_name[t.name]) for t in ARESimulationToolManager(apps).list_tools()
                      if t.name not in HIDDEN}
        aui = self.env.apps.get("AgentUserInterface")
        if isinstance(aui, AgentUserInterface):
            aui.wait_for_user_response = False
        self.pending: list[Any] = []
        self.first_message: str | None = None
        self.verdict: dict | None = None
        self.held = False  # the clock paused by the harness (`pause`) while its model generates

    # -------------------------------------------------------------- notifications
    def _drain(self) -> None:
        now = datetime.fromtimestamp(self.env.time_manager.time(), tz=UTC)
        self.pending += self.env.notification_system.message_queue.get_by_timestamp(now)

    def take_notifications(self) -> list[str]:
        self._drain()
        taken, self.pending = self.pending, []
        return [f"[notification] {m.message_type.value}: {m.message}" for m in taken]

    def task(self, timeout: float = 30.0) -> str:
        """The first user message's text (its notification is consumed)."""
        deadline = time.monotonic() + timeout
        while self.first_message is None and time.monotonic() < deadline:
            self._drain()
            for i, message in enumerate(self.pending):
                if message.message_type == MessageType.USER_MESSAGE:
                    self.pending.pop(i)
                    found = re.search(r"Message: (.*?)\nAlready read:", message.message, re.S)
                    self.first_message = found.group(1) if found else message.message
                    break
            else:
                time.sleep(0.05)
        if self.first_message is None:
            raise RuntimeError(f"the scenario sent no user message within {timeout:g} s")
        return self.first_message

    # ---------------------------------------------------------------------- turns
    def turns_done(self) -> int:
        return sum(1 for event in self.env.event_log.list_view() if is_send_message_to_user(event))

    def loop_alive(self) -> bool:
        return self.env.thread is not None and self.env.thread.is_alive()

    def over(self) -> bool:
        return (self.env.state in (EnvironmentState.STOPPED, EnvironmentState.FAILED) or not self.loop_alive()
                or self.turns_done() >= (self.scenario.nb_turns or 1))

    def after_turn(self) -> list[str]:
        """After the agent's message to the user: the user's next message, or why there is none."""
        if self.turns_done() >= (self.scenario.nb_turns or 1):
            return ["[harness] That was the last turn: the task is over."]
        deadline, said = time.monotonic() + TURN_WAIT_S, []
        while time.monotonic() < deadline:
            said += self.take_notifications()
            if any(MessageType.USER_MESSAGE.value in line or MessageType.ENVIRONMENT_STOP.value in line
                   for line in said):
                return said
            if not self.loop_alive():
                break
            time.sleep(0.05)
        return said + ["[harness] No further message from the user: the task is over."]

    # ---------------------------------------------------------------------- tools
    def call(self, name: str, arguments: dict) -> tuple[str, bool]:
        """A tool's result as text, and whether it is an error (ARE's error goes back to the agent)."""
        mcp_tool, app_tool = self.tools[name]
        try:
            values = mcp_tool.fn_metadata.arg_model.model_validate(arguments or {}).model_dump_one_level()
            return json.dumps(make_serializable(app_tool(**values)), default=str), False
        except Exception as exc:  # noqa: BLE001
            return f"{type(exc).__name__}: {exc}", True

    def event(self, event_id: str) -> dict | None:
        for event in self.env.event_log.list_view():
            if event.event_id == event_id:
                return {"event_time": event.event_time, "type": event.event_type.name,
                        "return_value": make_serializable(event.metadata.return_value)}
        return None

    # ---------------------------------------------------------------------- clock
    def pause(self) -> None:
        if self.env.state == EnvironmentState.RUNNING:
            self.env.pause()
            self.held = True

    def resume(self, offset: float) -> None:
        if self.held and self.env.state == EnvironmentState.PAUSED:
            self.env.resume_with_offset(max(float(offset), 0.0))
        self.held = False

    # -------------------------------------------------------------------- verdict
    def finish(self) -> dict:
        """ARE's verdict, judged once (the last turn; earlier turns were judged online), then the env stops."""
        if self.verdict is not None:
            return self.verdict
        env, scenario = self.env, self.scenario
        if env.state == EnvironmentState.RUNNING:
            env.pause()
        result = scenario.validate(env)
        judge = getattr(scenario, "judge", None)
        error = getattr(judge, "harness_error", None) or (HostLLM.errors[0] if HostLLM.errors else None)
        if error is None and result.exception is not None:
            error = f"the judge raised {type(result.exception).__name__}: {result.exception}"
        if error is None and not self.loop_alive() and env.state not in (EnvironmentState.STOPPED,
                                                                          EnvironmentState.FAILED):
            error = "ARE's event loop died"
        verdict = "error" if error else {True: "pass", False: "fail"}.get(result.success, "unjudged")
        rationale = str(result.rationale) if result.rationale else ""
        self.verdict = {"verdict": verdict, "success": result.success, "rationale": rationale,
                        "error": error, "judge": self.judge_mode, "turns": scenario.nb_turns,
                        "turns_done": self.turns_done(), "oracle_actions": self._matches(judge)}
        if env.state in (EnvironmentState.RUNNING, EnvironmentState.PAUSED):
            env.stop()
        if self.trace is not None:
            self.verdict["are_trace"] = self._export(result)
        return self.verdict

    def _export(self, result) -> dict:
        """The run as ARE's runner exports it (its ScenarioRunner._export_trace, "hf" format), gzipped to `trace`:
        its size, or why it could not be exported (the verdict stands either way)."""
        from are.simulation.data_handler.exporter import JsonScenarioExporter
        from are.simulation.scenarios.scenario import ScenarioStatus

        decision = (ScenarioStatus.Valid if result.success else ScenarioStatus.Invalid).value
        try:
            exported = json.loads(JsonScenarioExporter().export_to_json(
                self.env, self.scenario, self.scenario.scenario_id, None, None, "harness", decision,
                scenario_exception=result.exception))
            exported["events"] = self.given_events  # the scenario's own, not the run's (the module docstring)
            text = json.dumps(exported, ensure_ascii=False)
            data = gzip.compress(text.encode("utf-8"), compresslevel=6)
            with open(self.trace, "wb") as fh:
                fh.write(data)
        except Exception as exc:  # noqa: BLE001 - the verdict is kept; the trace's absence is said
            return {"error": f"ARE's exporter raised {type(exc).__name__}: {str(exc)[:500]}"}
        return {"bytes": len(text.encode("utf-8")), "gzip_bytes": len(data)}

    @staticmethod
    def _matches(judge) -> list[dict]:
        """Each oracle action of the judged turns: matched to which agent action, or not."""
        state = getattr(judge, "state", None)
        if state is None or not state.initialized:
            return []
        found = []
        for turn, oracle_events in enumerate(state.turn_to_oracle_events):
            for oracle in oracle_events:
                if oracle.event_type != EventType.AGENT:
                    continue
                index = state.oracle_id_to_agent_idx.get(oracle.event_id)
                agent = state.agent_events[index] if index is not None and index < len(state.agent_events) else None
                found.append({"turn": turn, "oracle_event_id": oracle.event_id, "tool": oracle.tool_name,
                              "judged": turn <= state.turn_idx, "matched": index is not None,
                              "agent_event_id": agent.event_id if agent is not None else None})
        return found


def serve(scenario: Scenario | None, refused: str | None = None) -> None:
    """Serve `scenario`; or, when ARE could not set it up (`refused`, its reason), the hidden tools alone:
    `harness__setup` says why, any other call is refused with it."""
    server: Server = Server("gaia2")
    one_at_a_time = asyncio.Lock()  # ARE's apps take one call at a time, as when the calls ran in the loop itself
    hidden = [types.Tool(name="harness__setup", description="Why ARE could not set the scenario up (null: it did).",
                         inputSchema={"type": "object", "properties": {}}),
              types.Tool(name="harness__task", description="The first user message.",
                         inputSchema={"type": "object", "properties": {}}),
              types.Tool(name="harness__event", description="A completed event's time and return value.",
                         inputSchema={"type": "object", "properties": {"event_id": {"type": "string"}},
                                      "required": ["event_id"]}),
              types.Tool(name="harness__finish", description="ARE's verdict (once); the scenario stops.",
                         inputSchema={"type": "object", "properties": {}}),
              types.Tool(name="harness__pause", description="Hold the simulated clock (the model generates).",
                         inputSchema={"type": "object", "properties": {}}),
              types.Tool(name="harness__resume", description="Let the clock go on, moved by `offset` seconds.",
                         inputSchema={"type": "object", "properties": {"offset": {"type": "number"}},
                                      "required": ["offset"]})]

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        if scenario is None:
            return hidden
        return [types.Tool(name=name, description=mcp_tool.description,
                           inputSchema=mcp_tool.fn_metadata.arg_model.model_json_schema())
                for name, (mcp_tool, _) in scenario.tools.items()] + hidden

    @server.call_tool()
    async def call_tool(name: str, arguments: dict) -> list[types.TextContent]:
        if name == "harness__setup":
            return [types.TextContent(type="text", text=json.dumps({"refused": refused}))]
        if scenario is None:
            raise ValueError(f"ARE could not set the scenario up: {refused}")
        if HostLLM.session is None:
            HostLLM.session, HostLLM.loop = server.request_context.session, asyncio.get_running_loop()
        if name == "harness__task":
            texts = [await asyncio.to_thread(scenario.task)]
        elif name == "harness__event":
            texts = [json.dumps(scenario.event(str(arguments.get("event_id"))))]
        elif name in ("harness__pause", "harness__resume"):
            if name == "harness__pause":
                scenario.pause()
            else:
                scenario.resume(arguments.get("offset", 0.0))
            texts = [json.dumps({"time": scenario.env.time_manager.time()})]
        elif name == "harness__finish":
            texts = [json.dumps(await asyncio.to_thread(scenario.finish))]
        elif name not in scenario.tools:
            raise ValueError(f"no tool named {name!r}")
        else:
            async with one_at_a_time:  # in a thread: an app agent's model is asked through this loop meanwhile
                text, failed = await asyncio.to_thread(scenario.call, name, arguments)
            if failed:
                raise ValueError(text)
            texts = [text] + scenario.take_notifications()
            if name == SEND_TO_USER:
                texts += await asyncio.to_thread(scenario.after_turn)
        return [types.TextContent(type="text", text=text) for text in texts]

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve one Gaia2 scenario's apps over MCP (stdio).")
    parser.add_argument("scenario")
    parser.add_argument("--judge", choices=["hard", "llm"], default="hard")
    parser.add_argument("--judge-model")
    parser.add_argument("--noise", action="store_true", help="Gaia2's noise phase")
    parser.add_argument("--a2a", action="store_true", help="Gaia2's agent2agent phase")
    parser.add_argument("--run-number", type=int, help="the run's number (its epoch), in the exported trace")
    parser.add_argument("--trace", help="where ARE's exported trace goes once judged (gzipped JSON)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, force=True)  # ARE's modules log every tick
    for name in ("are", "LiteLLM", "litellm", "httpx"):
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        scenario = Scenario(args.scenario, args.judge, args.judge_model, args.noise, args.a2a, args.run_number,
                            args.trace)
    except Refused as exc:
        serve(None, str(exc))
    else:
        serve(scenario)


if __name__ == "__main__":
    main()
