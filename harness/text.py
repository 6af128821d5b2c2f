"""Text from outside made storable: a model, a server or a page may send any code point JSON can
spell, including a lone surrogate (`"\\udc80"` is valid JSON; Python decodes it to a str that UTF-8
cannot encode, so writing it to a row, a report or the terminal raises).

`scrub` replaces every surrogate code point of a str (a pair is already one code point once
decoded, so any left is lone) with U+FFFD, the replacement character a decoder puts for bytes it
cannot read, in strs, dicts, lists and tuples, keys too; other values are returned as they are.
`model_json` is a pydantic model's JSON as `model_dump_json` writes it, of a scrubbed copy only
when it would otherwise fail (so the usual bytes are unchanged).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

SURROGATES = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def scrub(value: Any) -> Any:
    """`value` with each surrogate code point of its strings replaced by U+FFFD (see the module)."""
    if isinstance(value, str):
        return SURROGATES.sub(REPLACEMENT, value) if SURROGATES.search(value) else value
    if isinstance(value, dict):
        return {scrub(k): scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    if isinstance(value, tuple):
        return tuple(scrub(v) for v in value)
    return value


def model_json(model: BaseModel, indent: int | None = None) -> str:
    """`model.model_dump_json(indent=...)`; when a string of it holds a lone surrogate, that of a scrubbed copy."""
    try:
        return model.model_dump_json(indent=indent)
    except PydanticSerializationError:
        return model.model_validate(scrub(model.model_dump())).model_dump_json(indent=indent)
