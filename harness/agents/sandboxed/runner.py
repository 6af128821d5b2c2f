"""`--agent sandbox:COMMAND`: an agent that is a program of its own, run inside the sandbox.

COMMAND is a shell command (run by bash in the sandbox's working directory, as the sandbox's user: /workspace,
or a task image's own, e.g. a Harbor task's /app): a program in the
sandbox image (or one built from a copy of images/ with it added, HARNESS_IMAGES_DIR), one among the task's files
(`python3 /workspace/agent.py`), or a file of the host's named `@PATH` (relative to the harness's
working directory), which is copied into the sandbox before the agent starts and replaced by its path
there (`sandbox:python3 @agents/mine.py --fast`). A missing `@PATH` is an input error at load.

The agent gets the task on its stdin and in the file $HARNESS_TASK_FILE, the model through
OPENAI_BASE_URL / ANTHROPIC_BASE_URL (a loopback port inside the sandbox, relay.py, carried to the
per-instance proxy on the host, proxy.py) with OPENAI_API_KEY / ANTHROPIC_API_KEY set to the
instance's token (the real key never enters the sandbox) and HARNESS_MODEL the configured model's
id. Whatever model the agent asks for, the run's model answers with its own settings. The instance's
tools (those the plain runner would get: for a Gaia2 instance its scenario's apps alone) are an MCP
server at $HARNESS_MCP_URL (streamable HTTP, `http://127.0.0.1:PORT/mcp` on the same relay, the same
token as a bearer; tools.py): each call runs the harness's own tool function, traced and guarded as
for any runner. The answer is
the file $HARNESS_ANSWER_FILE when the agent writes one, else its stdout; `<solution>` inside it is
read as for any agent. An exit code other than 0 is an agent error (with its stderr's end). Its stderr, whatever
its exit code, is kept in the trace (a `stderr` event per run, its last STDERR_KEPT characters).

A turn the simulated user answers runs the command again, with the task, the agent's last answer
and the reply as its task (the program keeps no state between runs).
"""

from __future__ import annotations

import asyncio
import http.client
import re
import secrets
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.agents.contract import AgentContext, AgentRunner
from harness.agents.sandboxed.proxy import SOURCE, ModelProxy
from harness.agents.sandboxed.relay import ROOT, Relay, relayed
from harness.agents.sandboxed.tools import ToolServer, served
from harness.environments.tools import offered
from harness.errors import AgentError, HarnessError, InputError, SandboxFileNotFound
from harness.models.factory import chat_model
from harness.traces import Message, Stderr, ToolsOffered

HOST_FILE = re.compile(r"(?<!\S)@(\S+)")
FILES = f"{ROOT}/files"
STDERR_SHOWN = 600  # characters of a failed agent's stderr in its error
STDERR_KEPT = 20_000  # characters of its stderr kept in the trace, each run (the end of it)
KEPT_HEADERS = ("content-type", "x-should-retry", "retry-after")  # of the proxy's answers, to the agent
FOLLOW_UP = ("{task}\n\nYour previous answer was:\n{answer}\n\nThe user replies:\n{reply}")


@dataclass(frozen=True)
class Command:
    text: str  # as given, @PATH words and all
    files: tuple[Path, ...]  # the host files its @PATH words name, in order


def command(agent: str) -> Command:
    """The command of `--agent sandbox:COMMAND`, its host files checked (InputError naming the flag)."""
    text = agent.split(":", 1)[1].strip()
    if not text:
        raise InputError(f"--agent {agent}: no command after 'sandbox:'")
    files = tuple(Path(word).resolve() for word in HOST_FILE.findall(text))
    for path in files:
        if not path.is_file():
            raise InputError(f"--agent {agent}: {path} (an @PATH to copy into the sandbox) is not a file")
    return Command(text, files)


class SandboxedRunner(AgentRunner):
    preload = ("openai",)

    async def setup(self, ctx: AgentContext) -> None:
        self.ctx, self.command = ctx, self.target
        self.sandbox = ctx.envs.code.sandbox
        self.chat = chat_model(ctx.model, ctx.meter, ctx.replay_turns)
        self.proxy = ModelProxy(self.chat, secrets.token_urlsafe(24), ctx.model.model)
        self.proxy.start()
        self.tools = ToolServer(offered(ctx.envs, ctx.instance), self.proxy.token, ctx.tracer, self.proxy.asked,
                                ctx.meter)
        await self.tools.start()
        self.argv = ["bash", "-c", await ctx.envs.call(self._install)]
        self.task = ""
        self.last = ""
        self.runs = 0
        # Its runs' spools, its own: a runner after it in the same sandbox (a multi-step task's next step) must not
        # read what a run of this one that was stopped left in its spool (its exit code)
        self.spools = f"{ROOT}/{secrets.token_hex(6)}"

    def tools_offered(self) -> ToolsOffered:
        """The tool server's tools (the in-sandbox program's own, if it has any, are not the harness's to know)."""
        return ToolsOffered(tools=self.tools.definitions)

    def _install(self) -> str:
        """Copy the command's host files in; the command with their paths inside the sandbox."""
        places = iter(f"{FILES}/{i}/{path.name}" for i, path in enumerate(self.command.files))
        for i, path in enumerate(self.command.files):
            done = self.sandbox.exec(["sh", "-c", 'mkdir -p "$1" && cat > "$1/$2" && chmod +x "$1/$2"', "sh",
                                      f"{FILES}/{i}", path.name], stdin=path.read_bytes(), timeout=60)
            if not done.ok:
                raise AgentError(f"could not copy {path} into the sandbox: {done.stderr.strip()[-STDERR_SHOWN:]}")
        return HOST_FILE.sub(lambda _: next(places), self.command.text)

    async def turn(self, message: str) -> str:
        self.runs += 1
        if self.runs == 1:
            self.task = message
        task = message if self.runs == 1 else FOLLOW_UP.format(task=self.task, answer=self.last, reply=message)
        spool = f"{self.spools}/run-{self.runs}"
        env = {"OPENAI_API_KEY": self.proxy.token, "ANTHROPIC_API_KEY": self.proxy.token,
               "HARNESS_MODEL": self.ctx.model.model, "HARNESS_TASK_FILE": f"{spool}/task.txt",
               "HARNESS_ANSWER_FILE": f"{spool}/answer.txt"}
        done = await relayed(Relay(self.sandbox, spool), self.argv, task, env, self.ctx.limits.instance_timeout,
                             self._forward, lambda: self._stopped() is not None, self.ctx.envs.guard,
                             abandon=self.proxy.cancel)
        if done.stderr.strip():
            cut = max(len(done.stderr) - STDERR_KEPT, 0)
            self.ctx.tracer.emit(Stderr(source=SOURCE, exit_code=done.exit_code, content=done.stderr[cut:],
                                        omitted=cut))
        if (stopped := self._stopped()) is not None:
            raise stopped
        if not done.ok:
            raise AgentError(f"the agent program exited with code {done.exit_code}"
                             f"{' (timed out)' if done.timed_out else ''}: {done.stderr.strip()[-STDERR_SHOWN:]}")
        self.last = await self._written(f"{spool}/answer.txt") or done.stdout
        self.ctx.tracer.emit(Message(source=SOURCE, content=self.last))
        return self.last

    async def _written(self, path: str) -> str | None:
        try:
            data = await self.ctx.envs.call(self.sandbox.read_file, path)
        except SandboxFileNotFound:
            return None
        return data.decode(errors="replace")

    def _stopped(self) -> HarnessError | None:
        """What ends the instance: a budget or failed model call (the proxy's), or a dead sandbox (a tool's)."""
        return self.proxy.stopped or self.tools.stopped

    async def _forward(self, request: dict[str, Any]) -> dict[str, Any]:
        if served(request["path"]):
            return await self.tools.answer(request)
        return await asyncio.to_thread(forward, self.proxy.url, request)

    async def close(self) -> None:
        proxy = getattr(self, "proxy", None)
        if proxy is not None:
            proxy.close()
            await self.chat.close()
        tools = getattr(self, "tools", None)
        if tools is not None:
            await tools.close()


def forward(url: str, request: dict[str, Any]) -> dict[str, Any]:
    """One relayed request (relay.py's form: its body as bytes) sent to the proxy at `url`; its answer in
    the same form."""
    where = urllib.parse.urlsplit(url)
    headers = {k: v for k, v in request["headers"].items()
               if k.lower() in ("content-type", "authorization", "x-api-key", "anthropic-version")}
    connection = http.client.HTTPConnection(where.hostname or "127.0.0.1", where.port)
    try:
        connection.request(request["method"], request["path"], body=request["body"], headers=headers)
        response = connection.getresponse()
        body = response.read()
    finally:
        connection.close()
    return {"status": response.status, "headers": {k: v for k, v in response.getheaders() if k.lower() in KEPT_HEADERS},
            "body": body}
