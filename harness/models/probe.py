"""Preflight of the model sections a run uses: one real request each, before any container.

Each request is made the way the run will make its calls: the agent runner says how
(`AgentRunner.preflight` returns its first call: the AutoGen runner sends it through the AutoGen
client it will use, with the agent's tools and system message; the plain runner with its tool
schemas); without one, and for the judge, a plain chat completion stands for it.

Rules: a section that cannot work for any instance is an InputError (exit 2) naming the section
(`ModelSection.where`: `--model NAME [llm.NAME]`, or the flags that made it) with the server's own
words, on one line, control characters dropped, at most WORDS characters: the base_url does not
answer (refused, unresolvable, no answer within the section's `timeout`), its reply is longer than
HARNESS_MODEL_MAX_REPLY_MIB (models/http.py), the server refuses the request (a
bad key, an unknown model id, tools it will not take, a parameter it does not know: any 4xx but
429), the client refuses it (e.g. a model_info without function calling for an agent with tools),
or what answers is not an OpenAI-compatible chat completion (not JSON, no choices). A busy or
failing server (429, 5xx) is only a warning: it may recover, and instances that meet it record
model errors; but a 501 or 505, or an HTML page for any status, is not a model server's answer (a web
server, a proxy's error page at that base_url): exit 2 with the status and the page's words.
Replay sections need no probe. Each request has the section's own `timeout` (a CPU
model's first call, 1.6k tokens of tool schemas, may take 50 s: the run will wait that long too), and
one retry. The whole preflight has one deadline (a server that trickles bytes never trips a per-read
timeout): HARNESS_PREFLIGHT_TIMEOUT, or by default the probed sections' timeouts added up plus
PREFLIGHT_SLACK seconds, at least PREFLIGHT_FLOOR; past it, an InputError naming the section it was
waiting on. The probe carries the header `X-Harness-Preflight: 1`,
so a server's logs (and the tests' fake server) can tell it from an agent's call.

Each section is probed through its provider's SDK (models/providers.py): the chat API for openai,
azure and gemini, the Messages API for anthropic (whose errors are read the same way: a 529
overloaded is a warning, a 401 a refusal).
"""

from __future__ import annotations

import html
import json
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.errors import InputError, ModelError
from harness.models.config import ModelSection
from harness.models.textcalls import PARSERS, TEXT_TOOL_CALLS, offered_names, text_tool_call
from harness.settings import settings
from harness.terminal import flat
from harness.text import model_json
from harness.usage import counts

PROBE_HEADER = "X-Harness-Preflight"
PREFLIGHT_FLOOR = 60.0  # seconds: the default deadline of the whole preflight is at least this
PREFLIGHT_SLACK = 30.0  # seconds added to the sections' timeouts (connecting, a quick retry)
PROBE_PROMPT = "This is a connectivity check. Reply with the single word OK."
WORDS = 300  # characters of the server's words kept in a message
# Statuses no model server answers a chat completion with: 501 (the method or path is not served: a
# plain web server) and 505 (the HTTP version): exit 2, like an HTML page in place of the error JSON.
NOT_A_MODEL_SERVER = (501, 505)


class NotACompletion(Exception):
    """What answered is not an OpenAI chat completion (raised by a runner's preflight call)."""


@dataclass(frozen=True)
class ModelCheck:
    """One model the run calls: the flag naming it, its section, and the runner's first call made for
    real (None: a plain chat completion stands for it)."""

    flag: str
    section: ModelSection
    request: Callable[[], Any] | None = None
    budget: str = ""  # the run's budget flags ("--max-cost", ...): its replies must then carry their usage


@dataclass(frozen=True)
class Answered:
    """What a preflight call's reply said: its token usage (None: not read), and the offered tool its text
    calls when the reply is nothing but a tool call written as text (models/textcalls.py; None: not one)."""

    usage: dict[str, int] | None = None
    text_tool_call: str | None = None


def probe_section(section: ModelSection) -> ModelSection:
    """The section as the preflight calls it: its own timeout per request, one retry."""
    return section.model_copy(update={"max_retries": 1})


def probe_all(checks: list[ModelCheck], deadline: float | None = None) -> list[str]:
    """Probe each model once, by section name; return the warnings. All of it within `deadline`
    seconds (HARNESS_PREFLIGHT_TIMEOUT, or `default_deadline`): past it, an InputError naming the
    section still being probed (its request is left to the process's exit: a daemon thread)."""
    todo, seen = [], set()
    for check in checks:
        if check.section.kind != "replay" and check.section.name not in seen:
            seen.add(check.section.name)
            todo.append(check)
    if not todo:
        return []
    if deadline is None:
        deadline = settings().preflight_timeout or default_deadline([check.section for check in todo])
    done: dict[str, Any] = {"warnings": [], "at": todo[0]}

    def work() -> None:
        try:
            for check in todo:
                done["at"] = check
                if warning := probe(check):
                    done["warnings"].append(warning)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            done["error"] = exc

    worker = threading.Thread(target=work, name="model-preflight", daemon=True)
    worker.start()
    worker.join(deadline)
    if worker.is_alive():
        knob = "HARNESS_PREFLIGHT_TIMEOUT" if settings().preflight_timeout else \
            "the sections' timeouts; HARNESS_PREFLIGHT_TIMEOUT sets it"
        raise InputError(f"{_where(done['at'])}: the model preflight did not end within {deadline:g} s ({knob})")
    if "error" in done:
        raise done["error"]
    return done["warnings"]


def default_deadline(sections: list[ModelSection]) -> float:
    """The whole preflight's deadline without HARNESS_PREFLIGHT_TIMEOUT: every section's timeout honoured."""
    return max(PREFLIGHT_FLOOR, sum(section.timeout for section in sections) + PREFLIGHT_SLACK)


def _where(check: ModelCheck) -> str:
    section = check.section
    default = "the Anthropic API" if section.provider == "anthropic" else "the OpenAI API"
    at = section.azure_endpoint or section.endpoint() or default
    return f"{section.where(check.flag)} ({section.model} at {at})"


def probe(check: ModelCheck) -> str | None:
    """Make the check's request; a warning, None, or InputError."""
    from harness.models.http import too_large  # the HTTP clients' modules: only a run that calls a model

    section, where = check.section, _where(check)
    sdk = _sdk(section)
    try:
        answered = check.request() if check.request is not None else chat_request(probe_section(section))
        if check.budget:
            plain = answered if check.request is None else chat_request(probe_section(section))
            _priceable(check, where, plain.usage)
    except sdk.APITimeoutError:
        raise InputError(f"{where}: no answer within {section.timeout:g} s (its timeout; preflight)") from None
    except sdk.APIConnectionError as exc:
        if (big := too_large(exc)) is not None:
            raise InputError(f"{where}: {clean(big)} (preflight)") from None
        raise InputError(f"{where}: cannot connect ({clean(_cause(exc))})") from None
    except sdk.APIStatusError as exc:
        page = page_words(_body_text(exc))
        words = f"{exc.status_code} {page or clean(_server_words(exc))}"
        if exc.status_code in NOT_A_MODEL_SERVER or page is not None:
            raise InputError(f"{where}: answered the preflight with {words}: not an OpenAI-compatible model "
                             "server (is base_url right?)") from None
        if exc.status_code == 429 or exc.status_code >= 500:
            return f"warning: {where} answered the preflight with {words}; going on"
        raise InputError(f"{where}: the server refused the preflight call: {words}{_no_v1(section, exc)}") from None
    except (NotACompletion, sdk.APIResponseValidationError, json.JSONDecodeError) as exc:
        raise InputError(f"{where}: the reply is not a chat completion ({clean(exc)})") from None
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - the client refused the call before or after sending it
        raise InputError(f"{where}: the preflight call failed: {type(exc).__name__}: {clean(exc)}") from None
    if isinstance(answered, Answered) and answered.text_tool_call:
        return (f"warning: {where} answered the preflight with a call of {answered.text_tool_call} written as "
                f"text, not as a tool call: {TEXT_TOOL_CALLS} {PARSERS}; else no tool runs and such a reply "
                "is no answer")
    return None


def _priceable(check: ModelCheck, where: str, usage: dict[str, int] | None) -> None:
    """Under a budget, a reply without token usage (a server that omits `usage`) is refused: its calls
    would cost $0 and the budget could not be kept, unless its section prices such a call
    (`price_per_call_without_usage`). `usage`: the plain call's counts (None: unknown)."""
    if check.section.price_per_call_without_usage is not None:
        return
    if isinstance(usage, dict) and not usage.get("prompt_tokens") and not usage.get("completion_tokens"):
        raise InputError(f"{check.budget}: {where} answered the preflight without token usage, so its calls "
                         f"cannot be priced and the budget cannot be kept; use a server that reports `usage`, "
                         f"set price_per_call_without_usage in its section, or run without {check.budget}")


def _sdk(section: ModelSection) -> Any:
    """The SDK module whose errors the section's calls raise (both name them alike)."""
    import importlib

    return importlib.import_module("anthropic" if section.provider == "anthropic" else "openai")


def chat_request(section: ModelSection, tools: list[dict] | None = None, system: str | None = None) -> Answered:
    """One chat completion with this section's model and settings (and `tools`, OpenAI-format, and a
    system message when the runner sends them), through the official client of its provider: its
    usage's token classes (None: the Messages API's, not read here) and whether its text calls one of
    `tools`. NotACompletion when the reply is not one."""
    if section.provider == "anthropic":
        _messages_request(section, tools, system)
        return Answered()
    import openai
    from openai.types.chat import ChatCompletion, ChatCompletionMessageParam

    from harness.models.providers import openai_client

    kwargs: dict[str, Any] = {"temperature": section.temperature} if section.temperature is not None else {}
    if section.max_tokens is not None:
        kwargs["max_tokens"] = section.max_tokens
    if tools:
        kwargs["tools"] = tools
    messages: list[ChatCompletionMessageParam] = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": PROBE_PROMPT})
    client = openai_client(section, asynchronous=False)
    try:
        reply = client.chat.completions.create(model=section.model, messages=messages,
                                               extra_headers={PROBE_HEADER: "1"}, **kwargs)
    except (openai.APIStatusError, openai.APIConnectionError):  # timeouts included: probe() words them
        raise
    except (openai.OpenAIError, ValueError) as exc:  # e.g. a JSON content type with a body that is not JSON
        raise NotACompletion(f"{type(exc).__name__}: {exc}") from None
    finally:
        client.close()
    if not isinstance(reply, ChatCompletion) or not reply.choices:
        text = reply if isinstance(reply, str) else model_json(reply)
        page = page_words(text)
        raise NotACompletion(f"an HTML page: {page}" if page is not None else repr(text[:WORDS]))
    message = reply.choices[0].message
    named = None if message is None or message.tool_calls else text_tool_call(message.content, offered_names(tools))
    return Answered(counts(reply.usage), named)


def _messages_request(section: ModelSection, tools: list[dict] | None, system: str | None) -> None:
    """chat_request's call through the Messages API (models/anthropic_messages.py)."""
    import anthropic

    from harness.models.anthropic_messages import read_reply, request
    from harness.models.providers import anthropic_client

    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": PROBE_PROMPT}]
    client = anthropic_client(section, asynchronous=False, headers={PROBE_HEADER: "1"})
    try:
        read_reply(client.messages.create(**request(section, messages, tools or [])), section.name)
    except (anthropic.APIStatusError, anthropic.APIConnectionError):
        raise
    except (anthropic.AnthropicError, ModelError, ValueError) as exc:
        raise NotACompletion(f"{type(exc).__name__}: {exc}") from None
    finally:
        client.close()


_HTML = re.compile(r"<\s*(?:!doctype\s+html|html|head|body|title|h1|center)\b", re.I)
_INVISIBLE = re.compile(r"<(script|style)\b.*?</\1\s*>|<!--.*?-->", re.I | re.S)
_TAG = re.compile(r"<[^>]*>")


def page_words(text: str | None) -> str | None:
    """The words of an HTML page (tags, scripts, styles and comments dropped, entities decoded), for a
    one-line message; None when `text` is not a page."""
    if not text or not _HTML.search(text[:4096]):
        return None
    return clean(html.unescape(_TAG.sub(" ", _INVISIBLE.sub(" ", text))))


def _body_text(exc) -> str | None:
    """The error response's body as text (already read by the SDK; None when it has none)."""
    try:
        return exc.response.text
    except Exception:  # noqa: BLE001 - a response without a readable body
        return None


def clean(text: object, limit: int = WORDS) -> str:
    """Words for a one-line message: on one line (terminal.flat: escape sequences and control
    characters dropped), spaces collapsed, at most `limit` characters."""
    words = " ".join(flat(text).split())
    return words if len(words) <= limit else words[:limit - 1] + "…"


def _no_v1(section: ModelSection, exc: Any) -> str:
    """The hint for a 404 from a base URL that does not end in /v1 (an OpenAI-compatible server's usual root)."""
    base = (section.base_url or "").rstrip("/")
    if exc.status_code != 404 or not base or section.provider == "anthropic" or section.azure_endpoint \
            or base.endswith("/v1"):
        return ""
    return f" (the base URL {base} does not end in /v1, where OpenAI-compatible servers answer: try {base}/v1)"


def _cause(exc: BaseException) -> str:
    """The innermost cause's words (e.g. 'ConnectionRefusedError: [Errno 111] Connection refused'),
    following the chain an async client leaves too (its OS error is the context, not the cause)."""
    while (inner := exc.__cause__ or exc.__context__) is not None:
        exc = inner
    words = str(exc)
    reason = os.strerror(exc.errno) if isinstance(exc, OSError) and exc.errno else ""
    if reason and reason not in words:
        words = f"{reason}: {words}"
    return f"{type(exc).__name__}: {words}" if words else type(exc).__name__


def _server_words(exc) -> str:
    """The server's message: the openai SDK's error body is the error object, Anthropic's wraps it."""
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        body = body["error"]
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    return exc.message
