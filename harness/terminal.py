"""Messages to the terminal: plain text, never rich markup, never hard-wrapped.

Messages carry user data (paths, section names like `[llm.NAME]`, server replies), so
they are printed as `rich.text.Text`, which rich does not parse for markup, and with
`soft_wrap` so a log or CI capture gets each message on one line, whatever its width.
Text from elsewhere (an exception's message, an instance id) is made one line first
(`flat`, `first_line`): no message may span lines or carry the terminal's escape sequences, and
a lone surrogate (which the terminal's UTF-8 cannot encode) is shown as U+FFFD.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rich.console import Console
from rich.text import Text

from harness.text import scrub


def stderr_console() -> Console:
    return Console(stderr=True)


def say(console: Console, message: str, style: str | None = None) -> None:
    """Print one message as it is, but `printable` (styled as a whole, when the console has colour)."""
    console.print(Text(printable(message), style=style or ""), soft_wrap=True)


_SEQUENCES = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?")  # CSI and OSC sequences
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # control characters but tab and newline


def printable(text: object) -> str:
    """`text` without terminal escape sequences and control characters (tabs and newlines stay): what
    `say` prints, since a message may quote a model server, a page or an agent."""
    return _UNPRINTABLE.sub("", _SEQUENCES.sub("", scrub(str(text))))


_CONTROL = re.compile(r" *[\x00-\x1f\x7f-\x9f]+ *")


def flat(text: object) -> str:
    """`text` on one line: terminal escape sequences dropped, newlines and other control characters
    each run turned into one space. What every error message goes through before it is printed."""
    return _CONTROL.sub(" ", _SEQUENCES.sub("", scrub(str(text)))).strip()


def first_line(text: object, limit: int = 200) -> str:
    """The first non-blank line of `text`, flattened (see `flat`), cut to `limit` characters ("…"
    marks a cut). What a per-instance line shows of an error message, which may be a traceback."""
    lines = [line for line in _SEQUENCES.sub("", scrub(str(text))).splitlines() if line.strip()]
    line = flat(lines[0]) if lines else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def listed(items: Sequence[str], limit: int = 10) -> str:
    """At most `limit` items, comma-separated, then "+N more" for the rest."""
    shown = ", ".join(first_line(item, 80) for item in items[:limit])
    return shown + (f", +{len(items) - limit} more" if len(items) > limit else "")
