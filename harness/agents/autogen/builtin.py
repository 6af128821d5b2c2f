"""Built-in AutoGen agents and teams, wired to the sandbox environments."""

from __future__ import annotations

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
from autogen_agentchat.teams import MagenticOneGroupChat, RoundRobinGroupChat

from harness.agents.autogen.tools import sandbox_tools, web_tools

# The agent may loop over tools freely: the harness's meter enforces --max-steps
# (model calls) the same way for every agent and team, and records the limit.
UNBOUNDED = 10_000

SYSTEM = (
    "You solve tasks with tools that run inside a sandbox holding the task's files in /workspace. "
    "Inspect files and compute answers with the tools instead of guessing. When you are done, reply "
    "with a short explanation and the final answer inside <solution></solution>."
)


def assistant(model_client, envs, instance, limits):
    """One AssistantAgent that loops over tool calls until it answers in text."""
    tools = sandbox_tools(envs) + (web_tools(envs) if envs.web is not None else [])
    return AssistantAgent("assistant", model_client, tools=tools, system_message=SYSTEM,
                          max_tool_iterations=UNBOUNDED, reflect_on_tool_use=False)


def roundrobin(model_client, envs, instance, limits):
    """A solver with tools and a reviewer that approves with the final <solution>."""
    solver = AssistantAgent("solver", model_client, tools=sandbox_tools(envs), system_message=SYSTEM,
                            max_tool_iterations=UNBOUNDED, reflect_on_tool_use=False)
    reviewer = AssistantAgent("reviewer", model_client, system_message=(
        "Check the solver's work. If it is right, repeat its final answer inside <solution></solution>."))
    stop = TextMentionTermination("</solution>", sources=["reviewer"]) | MaxMessageTermination(
        (limits.max_steps or 30) + 1)
    return RoundRobinGroupChat([solver, reviewer], termination_condition=stop)


def magentic(model_client, envs, instance, limits):
    """A Magentic-One orchestrated team whose coder acts through the sandbox."""
    coder = AssistantAgent("coder", model_client, tools=sandbox_tools(envs), system_message=SYSTEM,
                           description="Runs Python and shell in the sandbox and reads the task's files.",
                           max_tool_iterations=10, reflect_on_tool_use=False)
    return MagenticOneGroupChat([coder], model_client=model_client, max_turns=limits.max_steps or 30)
