"""Built-in AutoGen agents and teams, wired to the sandbox environments."""

from __future__ import annotations

from autogen_agentchat.agents import ApprovalRequest, ApprovalResponse, AssistantAgent, CodeExecutorAgent
from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
from autogen_agentchat.teams import MagenticOneGroupChat, RoundRobinGroupChat

from harness.agents.autogen.executor import LANGUAGES, SandboxCodeExecutor
from harness.agents.autogen.tools import sandbox_tools, web_tools
from harness.agents.system import system_message
from harness.environments.families.browser import Browser
from harness.environments.families.mcp import Mcp

# The agent may loop over tools freely: the harness's meter enforces --max-steps
# (model calls) the same way for every agent and team, and records the limit; it also cuts
# one reply's tool calls to HARNESS_MAX_TOOL_CALLS_PER_REPLY (agents/autogen/models.py).
UNBOUNDED = 10_000



def assistant(model_client, envs, instance, limits):
    """One AssistantAgent that loops over tool calls until it answers in text."""
    tools = sandbox_tools(envs, instance) + web_tools(envs)
    return AssistantAgent("assistant", model_client, tools=tools,
                          system_message=system_message(instance, envs.code.sandbox.workdir),
                          max_tool_iterations=UNBOUNDED, reflect_on_tool_use=False)


def roundrobin(model_client, envs, instance, limits):
    """A solver with tools and a reviewer that approves with the final <solution>."""
    solver = AssistantAgent("solver", model_client, tools=sandbox_tools(envs, instance),
                            system_message=system_message(instance, envs.code.sandbox.workdir),
                            max_tool_iterations=UNBOUNDED, reflect_on_tool_use=False)
    reviewer = AssistantAgent("reviewer", model_client, system_message=(
        "Check the solver's work. If it is right, repeat its final answer inside <solution></solution>."))
    stop = TextMentionTermination("</solution>", sources=["reviewer"]) | MaxMessageTermination(
        (limits.max_steps or 30) + 1)
    return RoundRobinGroupChat([solver, reviewer], termination_condition=stop)


WEB_SURFER = (
    "You browse the web with a browser that runs inside the task's sandbox. Open pages, read them page by "
    "page, follow links, fill in forms and download files (downloads land in /workspace/downloads); when you "
    "have web_search, search first and open the results. Report what you found, with the URLs, as plain text."
)
FILE_SURFER = (
    "You read the task's files in the sandbox's /workspace (pdf, docx, xlsx, pptx, csv, json, html, zip, "
    "text...) as markdown with your tools, and report exactly what they say; a video's frames, a picture or "
    "a recording with the tools you have for them. You cannot run code."
)
CODER = (
    "You write code that the team's `executor` runs in a sandbox, whose working directory /workspace holds "
    "the task's files (pandas, numpy, openpyxl, pypdf, python-docx, python-pptx, markitdown installed). "
    "You cannot run code yourself: answer with exactly one complete, self-contained ```python code block "
    "(or ```sh for shell commands) that prints everything needed, and say briefly what it does. When the "
    "executor reports an error, fix the code and send the whole corrected block."
)
# MagenticOneGroupChat formats only its default final-answer prompt with the task; a custom one is
# sent as is, after the task ledger (which states the task), so this one refers to it instead.
FINAL_ANSWER_PROMPT = """
We are working on the task stated at the start of this conversation.

We have completed the task.

The above messages contain the conversation that took place to complete the task.

Based on the information gathered, provide the final answer to the original request.
The answer should be phrased as if you were speaking to the user, and must end with the final answer
alone (a number, word or short phrase, as the request asks) inside <solution></solution>.
"""


def _approve(request: ApprovalRequest) -> ApprovalResponse:
    """Code runs only inside the instance's sandbox, so every block is approved."""
    return ApprovalResponse(approved=True, reason="runs in the sandbox")


def magentic(model_client, envs, instance, limits):
    """A Magentic-One team (orchestrator, web surfer, file surfer, coder, executor) acting through the sandbox.
    The web surfer holds the browser, fetch_url and, when the run has a search provider, web_search; the
    coder holds the run's MCP tools, if any."""
    tools = {t.name: t for t in sandbox_tools(envs, instance)}
    # every sandbox tool has a member: the file surfer those that read files, the web surfer web_search
    # and fetch_url, the executor runs the coder's code (run_python, run_shell), the coder the MCP tools
    reading = [n for n in ("list_files", "read_file", "find_in_file", "view_image", "transcribe_audio",
                           "video_frames", "search_corpus") if n in tools]
    served = [tools[t.__name__] for t in envs.of(Mcp) or []]  # the MCP servers' tools (families/mcp.py)
    file_surfer = AssistantAgent(
        "file_surfer", model_client, tools=[tools[n] for n in reading],
        system_message=FILE_SURFER, max_tool_iterations=10, reflect_on_tool_use=False,
        description="Lists, reads and searches the task's files in /workspace (pdf, docx, xlsx, pptx, csv, "
                    "json, html, zip, text) as markdown, page by page; extracts a video's frames"
                    + (", looks at pictures" if "view_image" in tools else "")
                    + (", transcribes audio" if "transcribe_audio" in tools else "")
                    + ". Cannot run code or browse the web.")
    coder = AssistantAgent(
        "coder", model_client, system_message=CODER, tools=served or None, max_tool_iterations=10,
        reflect_on_tool_use=False,
        description="Writes Python (or shell) code in a ```python code block to compute, parse files or "
                    "analyse data; the code must then be run by the executor. Cannot run code itself."
                    + (f" Also calls these tools itself: {', '.join(t.name for t in served)}." if served else ""))
    executor = CodeExecutorAgent(
        "executor", code_executor=SandboxCodeExecutor(envs), supported_languages=LANGUAGES, sources=["coder"],
        approval_func=_approve,
        description="A computer terminal in the task's sandbox (files in /workspace). Runs the ```python or "
                    "```sh code blocks the coder wrote in its latest messages and reports their output. "
                    "Does nothing else.")
    browsing = web_tools(envs)
    web_surfer = AssistantAgent(
        "web_surfer", model_client, tools=browsing + [tools[n] for n in ("web_search", "fetch_url") if n in tools],
        system_message=WEB_SURFER, max_tool_iterations=10, reflect_on_tool_use=False,
        description=("Searches the web (web_search). " if "web_search" in tools else "")
        + ("Browses the web with a browser inside the task's sandbox: visits URLs, reads and searches pages, "
           "clicks links, types into forms and downloads files into /workspace/downloads. " if browsing else "")
        + "Fetches a static page or file by URL (fetch_url).")
    return MagenticOneGroupChat([web_surfer, file_surfer, coder, executor], model_client=model_client,
                                max_turns=limits.max_steps or 30, final_answer_prompt=FINAL_ANSWER_PROMPT)


async def websurfer(model_client, envs, instance, limits):
    """AutoGen's MultimodalWebSurfer on the sandbox's browser (injected Playwright context), and an
    assistant with the sandbox tools (web_search and the MCP tools among them, when the run has them:
    the surfer's own tool set is AutoGen's, fixed) that gives the final <solution>. An alternative to
    the built-in web tools; the browser still runs inside the sandbox."""
    from autogen_ext.agents.web_surfer import MultimodalWebSurfer

    browser = envs.of(Browser)
    assert browser is not None, "an agent process always builds the browser"
    playwright, context = await browser.playwright()
    surfer = MultimodalWebSurfer("web_surfer", model_client, start_page="about:blank", playwright=playwright,
                                 context=context, to_resize_viewport=False)
    solver = AssistantAgent("assistant", model_client, tools=sandbox_tools(envs, instance),
                            system_message=system_message(instance, envs.code.sandbox.workdir),
                            max_tool_iterations=UNBOUNDED, reflect_on_tool_use=False)
    stop = TextMentionTermination("</solution>", sources=["assistant"]) | MaxMessageTermination(
        (limits.max_steps or 30) + 1)
    return RoundRobinGroupChat([surfer, solver], termination_condition=stop)
