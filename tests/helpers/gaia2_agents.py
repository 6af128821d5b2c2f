"""A scripted Gaia2 agent for datasets/gaia2-smoke's proto_forward_email (tests/test_gaia2_run.py): it does what
a model would, through the scenario's own tools, without a model. `--agent tests.helpers.gaia2_agents:Forwarder`,
its way of going wrong named by HARNESS_TEST_GAIA2 (right, wrong_recipient, late, kill_are).

It waits for Greg's email (ARE's wait_for_notification: the simulated clock jumps to the next event), reads the
notification it gets mid-run, finds the email's id in the inbox, forwards it and tells the user."""

from __future__ import annotations

import asyncio
import json
import os
import time

from harness.agents.contract import AgentContext, AgentRunner
from harness.benchmarks.gaia2.family import Gaia2
from harness.errors import AgentError

DEADLINE_S = 60.0  # wall seconds for the simulated clock to get where the script waits for it


class Forwarder(AgentRunner):
    async def setup(self, ctx: AgentContext) -> None:
        self.ctx = ctx

    async def call(self, name: str, **arguments) -> str:
        env = self.ctx.envs.of(Gaia2)
        assert env is not None, "not a Gaia2 instance"
        tool = next(tool for tool in env.tools if tool.__name__ == name)
        result: str = await self.ctx.envs.guard(tool(**arguments))
        return result

    async def now(self) -> float:
        return float(json.loads((await self.call("SystemApp__get_current_time")).splitlines()[0])["current_timestamp"])

    async def until(self, done, what: str, waited: str) -> str:
        """Ask the clock until `done(text)` holds for what the calls returned since the wait (notifications
        included), `waited` being the wait's own result."""
        deadline, seen = time.monotonic() + DEADLINE_S, [waited]
        while time.monotonic() < deadline:
            seen.append(await self.call("SystemApp__get_current_time"))
            if done("\n".join(seen)):
                return "\n".join(seen)
            await asyncio.sleep(0.1)
        raise AgentError(f"the scripted agent waited {DEADLINE_S:g} s for {what}")

    async def turn(self, message: str, mode: str | None = None) -> str:
        mode = mode or os.environ.get("HARNESS_TEST_GAIA2", "right")
        if mode == "kill_are":
            # ARE's process alone (not the bridge that runs it), in the judge's sandbox: as if it crashed
            env = self.ctx.envs.of(Gaia2)
            assert env is not None and env.sandbox is not None, "not a Gaia2 instance"
            await asyncio.to_thread(env.sandbox.exec,
                                    ["pkill", "-f", "^/opt/are/bin/python /opt/harness/gaia2_driver"], timeout=30)
            await self.call("SystemApp__get_current_time")  # ARE is gone: this must not hang or pass
            return "<solution>unreachable</solution>"
        waited = await self.call("SystemApp__wait_for_notification", timeout=30)
        await self.until(lambda text: "[notification]" in text and "gregb@example.com" in text, "Greg's email",
                         waited)
        if mode != "late":
            # Hold ARE's clock from here, as the meter holds it while a model generates: on a loaded machine the
            # next calls' wall seconds (the hops to the judge's sandbox) made a right forward late by ARE's 25 s.
            env = self.ctx.envs.of(Gaia2)
            assert env is not None
            await env.pause()
        if mode == "late":  # half a minute of simulated time after the email, past the judge's 25 s
            start = await self.now()
            waited = await self.call("SystemApp__wait_for_notification", timeout=60)
            await self.until(lambda text: bool(_times(text)) and max(_times(text)) >= start + 55, "a minute to pass",
                             waited)
        listed = json.loads((await self.call("Emails__list_emails", folder_name="INBOX")).splitlines()[0])
        email = next(e for e in listed["emails"] if e["sender"] == "gregb@example.com")
        to = "janedoe@example.com" if mode == "wrong_recipient" else "johndoe@example.com"
        await self.call("Emails__forward_email", email_id=email["email_id"], recipients=[to], folder_name="INBOX")
        await self.call("AgentUserInterface__send_message_to_user", content="Done: I forwarded Greg's email.")
        return "<solution>done</solution>"


def _times(text: str) -> list[float]:
    found = []
    for line in text.splitlines():
        if line.startswith("{") and "current_timestamp" in line:
            found.append(float(json.loads(line)["current_timestamp"]))
    return found


class AppAgentForwarder(Forwarder):
    """The same task in Gaia2's agent2agent phase (tests/test_gaia2_a2a.py): the Emails app is an app agent of
    ARE's, so the agent hands the forwarding to `Emails__expert_agent` once Greg's email is there."""

    async def turn(self, message: str) -> str:
        env = self.ctx.envs.of(Gaia2)
        assert env is not None, "not a Gaia2 instance"
        offered = {tool.__name__: getattr(tool, "parameters", {}) for tool in env.tools}
        expert = offered.get("Emails__expert_agent", {})
        if "Emails__forward_email" in offered or expert.get("required") != ["task"] or "Contacts__expert_agent" \
                not in offered:  # ARE's AppAgent tool: `task`, a string
            raise AgentError(f"not the agent2agent phase's tools: {offered}")
        waited = await self.call("SystemApp__wait_for_notification", timeout=30)
        await self.until(lambda text: "[notification]" in text and "gregb@example.com" in text, "Greg's email",
                         waited)
        answer = await self.call("Emails__expert_agent", task="Forward Greg Barty's email (gregb@example.com) in "
                                                              "the INBOX to johndoe@example.com.")
        await self.call("AgentUserInterface__send_message_to_user", content=f"Done: {answer.splitlines()[0]}")
        return "<solution>done</solution>"


class Rejudged(Forwarder):
    """Each smoke scenario its own way, by epoch (tests/test_gaia2_rejudge.py): proto_find_image_file names the
    image in other words than the oracle's (epoch 1: rightly, so only ARE's soft checks can pass it; epoch 2:
    wrongly), proto_forward_email forwards as `Forwarder` does (epoch 1: right, in its own words to the user; epoch 2:
    to the wrong recipient), proto_multi_turn plays the oracle's own actions (both epochs)."""

    async def turn(self, message: str, mode: str | None = None) -> str:
        from harness.benchmarks.gaia2.oracle import run

        env = self.ctx.envs.of(Gaia2)
        assert env is not None, "not a Gaia2 instance"
        first = env.run_number == 1
        scenario = self.ctx.instance.instance_id
        if scenario == "proto_find_image_file":
            said = RIGHT_IMAGE if first else WRONG_IMAGE
            await self.call("AgentUserInterface__send_message_to_user", content=said)
            return "<solution>done</solution>"
        if scenario == "proto_forward_email":
            return await super().turn(message, "right" if first else "wrong_recipient")
        return await run(self.ctx)


RIGHT_IMAGE = "It is llama.jpg, in your Downloads folder."  # the oracle says "The image file is `llama.jpg`"
WRONG_IMAGE = "It is cat.png, in your Pictures folder."
