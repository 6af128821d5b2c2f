"""Preflight of the model sections a run uses: one real request each, before any container.

Each request is made the way the run will make its calls: the agent runner says how
(`AgentRunner.preflight` returns its first call: the AutoGen runner sends it through the AutoGen
client it will use, with the agent's tools and system message; the plain runner with its tool
schemas); without one, and for the judge, a plain chat completion stands for it.

Rules: a section that cannot work for any instance is an InputError (exit 2) naming the section
(`ModelSection.where`: `--model NAME [llm.NAME]`, or the flags that made it) with the server's own
words, on one line, control characters dropped, at most WORDS characters: the base_url does not
answer (refused, unresolvable, no answer within PROBE_TIMEOUT), its reply is longer than
HARNESS_MODEL_MAX_REPLY_MIB (models/http.py), the server refuses the request (a
bad key, an unknown model id, tools it will not take, a parameter it does not know: any 4xx but
429), the client refuses it (e.g. a model_info without function calling for an agent with tools),
or what answers is not an OpenAI-compatible chat completion (not JSON, no choices). A busy or
failing server (429, 5xx) is only a warning: it may recover, and instances that meet it record
model errors. Replay sections need no probe. The whole preflight has one deadline,
HARNESS_PREFLIGHT_TIMEOUT (a server that trickles bytes never trips a per-read timeout): past it,
an InputError naming the section it was waiting on. The probe carries the header `X-Harness-Preflight: 1`,
so a server's logs (and the tests' fake server) can tell it from an agent's call.

Each section is probed through its provider's SDK (models/providers.py): the chat API for openai,
azure and gemini, the Messages API for anthropic (whose errors are read the same way: a 529
overloaded is a warning, a 401 a refusal).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.errors import InputError, ModelError
from harness.models.config import ModelSection
from harness.models.http import too_large
from harness.models.providers import anthropic_client, openai_client
from harness.settings import settings
from harness.terminal import flat

PROBE_HEADER = "X-Harness-Preflight"
PROBE_TIMEOUT = 30.0  # seconds per request; one retry
PROBE_PROMPT = "This is a connectivity check. Reply with the single word OK."
WORDS = 300  # characters of the server's words kept in a message


class NotACompletion(Exception):
    """What answered is not an OpenAI chat completion (raised by a runner's preflight call)."""


@dataclass(frozen=True)
class ModelCheck:
    """One model the run calls: the flag naming it, its section, and the runner's first call made for
    real (None: a plain chat completion stands for it)."""

    flag: str
    section: ModelSection
    request: Callable[[], Any] | None = None


def probe_section(section: ModelSection) -> ModelSection:
    """The section as the preflight calls it: at most PROBE_TIMEOUT per request, one retry."""
    return section.model_copy(update={"timeout": min(section.timeout, PROBE_TIMEOUT), "max_retries": 1})


def probe_all(checks: list[ModelCheck], deadline: float | None = None) -> list[str]:
    """Probe each model once, by section name; return the warnings. All of it within `deadline`
    seconds (HARNESS_PREFLIGHT_TIMEOUT): past it, an InputError naming the section still being
    probed (its request is left to the process's exit: a daemon thread)."""
    deadline = settings().preflight_timeout if deadline is None else deadline
    todo, seen = [], set()
    for check in checks:
        if check.section.kind != "replay" and check.section.name not in seen:
            seen.add(check.section.name)
            todo.append(check)
    if not todo:
        return []
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
        raise InputError(f"{_where(done['at'])}: the model preflight did not end within {deadline:g} s "
                         "(HARNESS_PREFLIGHT_TIMEOUT)")
    if "error" in done:
        raise done["error"]
    return done["warnings"]


def _where(check: ModelCheck) -> str:
    section = check.section
    default = "the Anthropic API" if section.provider == "anthropic" else "the OpenAI API"
    at = section.azure_endpoint or section.endpoint() or default
    return f"{section.where(check.flag)} ({section.model} at {at})"


def probe(check: ModelCheck) -> str | None:
    """Make the check's request; a warning, None, or InputError."""
    section, where = check.section, _where(check)
    sdk = _sdk(section)
    try:
        (check.request or (lambda: chat_request(probe_section(section))))()
    except sdk.APITimeoutError:
        raise InputError(f"{where}: no answer within {min(section.timeout, PROBE_TIMEOUT):g} s (preflight)") from None
    except sdk.APIConnectionError as exc:
        if (big := too_large(exc)) is not None:
            raise InputError(f"{where}: {clean(big)} (preflight)") from None
        raise InputError(f"{where}: cannot connect ({clean(_cause(exc))})") from None
    except sdk.APIStatusError as exc:
        words = f"{exc.status_code} {clean(_server_words(exc))}"
        if exc.status_code == 429 or exc.status_code >= 500:
            return f"warning: {where} answered the preflight with {words}; going on"
        raise InputError(f"{where}: the server refused the preflight call: {words}") from None
    except (NotACompletion, sdk.APIResponseValidationError, json.JSONDecodeError) as exc:
        raise InputError(f"{where}: the reply is not a chat completion ({clean(exc)})") from None
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - the client refused the call before or after sending it
        raise InputError(f"{where}: the preflight call failed: {type(exc).__name__}: {clean(exc)}") from None
    return None


def _sdk(section: ModelSection) -> Any:
    """The SDK module whose errors the section's calls raise (both name them alike)."""
    import importlib

    return importlib.import_module("anthropic" if section.provider == "anthropic" else "openai")


def chat_request(section: ModelSection, tools: list[dict] | None = None, system: str | None = None) -> None:
    """One chat completion with this section's model and settings (and `tools`, OpenAI-format, and a
    system message when the runner sends them), through the official client of its provider.
    NotACompletion when the reply is not one."""
    if section.provider == "anthropic":
        return _messages_request(section, tools, system)
    import openai
    from openai.types.chat import ChatCompletion, ChatCompletionMessageParam

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
        text = reply if isinstance(reply, str) else reply.model_dump_json()
        raise NotACompletion(repr(text[:WORDS]))


def _messages_request(section: ModelSection, tools: list[dict] | None, system: str | None) -> None:
    """chat_request's call through the Messages API (models/anthropic_messages.py)."""
    import anthropic

    from harness.models.anthropic_messages import read_reply, request

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


def clean(text: object, limit: int = WORDS) -> str:
    """Words for a one-line message: on one line (terminal.flat: escape sequences and control
    characters dropped), spaces collapsed, at most `limit` characters."""
    words = " ".join(flat(text).split())
    return words if len(words) <= limit else words[:limit - 1] + "…"


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
