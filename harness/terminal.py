"""Messages to the terminal: plain text, never rich markup, never hard-wrapped.

Messages carry user data (paths, section names like `[llm.NAME]`, server replies), so
they are printed as `rich.text.Text`, which rich does not parse for markup, and with
`soft_wrap` so a log or CI capture gets each message on one line, whatever its width.
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text


def stderr_console() -> Console:
    return Console(stderr=True)


def say(console: Console, message: str, style: str | None = None) -> None:
    """Print one message as it is (styled as a whole, when the console has colour)."""
    console.print(Text(str(message), style=style or ""), soft_wrap=True)
