"""Preflight of the model sections a run uses: one small chat completion each, before any container.

Rules: a section that cannot work for any instance is an InputError (exit 2) with the
server's own words: the base_url does not answer (refused, unresolvable, no answer within
PROBE_TIMEOUT), the server refuses the request (a bad key, an unknown model id, a
parameter it does not take: any 4xx but 429), or what answers is not an OpenAI-compatible
chat completion (not JSON, no choices). A busy or failing server (429, 5xx) is only a
warning: it may recover, and instances that meet it record model errors. Replay sections
need no probe. The probe carries the header `X-Harness-Preflight: 1`, so a server's logs
(and the tests' fake server) can tell it from an agent's call.
"""

from __future__ import annotations

from typing import Any

from harness.errors import InputError
from harness.models.config import ModelSection

PROBE_HEADER = "X-Harness-Preflight"
PROBE_TIMEOUT = 30.0  # seconds per request; one retry
PROBE_PROMPT = "This is a connectivity check. Reply with the single word OK."


def probe_all(sections: list[tuple[str, ModelSection]]) -> list[str]:
    """Probe each (flag, section) once, by section name; return the warnings."""
    warnings, seen = [], set()
    for flag, section in sections:
        if section.kind == "replay" or section.name in seen:
            continue
        seen.add(section.name)
        warning = probe(section, flag)
        if warning:
            warnings.append(warning)
    return warnings


def probe(section: ModelSection, flag: str = "--model") -> str | None:
    """One completion with this section's model and settings; a warning, None, or InputError."""
    import openai
    from openai.types.chat import ChatCompletion

    where = f"{flag} {section.name} ({section.model} at {section.base_url or 'the OpenAI API'})"
    client = openai.OpenAI(api_key=section.api_key(), base_url=section.base_url, max_retries=1,
                           timeout=min(section.timeout, PROBE_TIMEOUT))
    kwargs: dict[str, Any] = {"temperature": section.temperature} if section.temperature is not None else {}
    if section.max_tokens is not None:
        kwargs["max_tokens"] = section.max_tokens
    try:
        reply = client.chat.completions.create(model=section.model, messages=[{"role": "user", "content": PROBE_PROMPT}],
                                               extra_headers={PROBE_HEADER: "1"}, **kwargs)
    except openai.APITimeoutError:
        raise InputError(f"{where}: no answer within {client.timeout} s (preflight)") from None
    except openai.APIConnectionError as exc:
        raise InputError(f"{where}: cannot connect ({_cause(exc)})") from None
    except openai.APIStatusError as exc:
        words = f"{exc.status_code} {_server_words(exc)}"
        if exc.status_code == 429 or exc.status_code >= 500:
            return f"warning: {where} answered the preflight with {words}; going on"
        raise InputError(f"{where}: the server refused the preflight call: {words}") from None
    except (openai.OpenAIError, ValueError) as exc:  # e.g. a JSON content type with a body that is not JSON
        raise InputError(f"{where}: the reply is not a chat completion ({type(exc).__name__}: {exc})") from None
    finally:
        client.close()
    if not isinstance(reply, ChatCompletion) or not reply.choices:
        text = reply if isinstance(reply, str) else reply.model_dump_json()
        raise InputError(f"{where}: the reply is not a chat completion: {text[:300]!r}")
    return None


def _cause(exc: BaseException) -> str:
    """The innermost cause's words (e.g. '[Errno 111] Connection refused')."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _server_words(exc) -> str:
    body = exc.body
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    return exc.message
