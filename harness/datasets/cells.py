"""One cell of a tabular dataset as a plain value: text, an integer, a list of names.

Cells come from JSON (plain Python values) or from pandas (numpy scalars and arrays, pandas'
missing values); `jsonable` turns either into JSON-safe Python, recognising numpy and pandas
types by their modules so neither library is imported here. Missing, NaN and infinite values
are None; a blank text cell counts as missing. In CSV every cell is text, so a list of names is
';'-joined or a JSON list; in JSON and parquet it is a list (or one name).
"""

from __future__ import annotations

import json
import math
from datetime import date, datetime
from typing import Any

_PLAIN = (str, int, bool)


def jsonable(value: Any) -> Any:
    """`value` with numpy/pandas types turned into plain JSON-safe Python values (missing ones, NaN
    and infinities: None)."""
    kind = type(value)
    if kind in _PLAIN or value is None:
        return value
    if kind.__module__ == "numpy":  # a scalar (ndim 0) or an array
        value = value.tolist() if getattr(value, "ndim", 0) else value.item()
    elif kind.__name__ in ("NAType", "NaTType"):  # pandas' missing values
        return None
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return None
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def text(value: Any) -> str | None:
    """A cell as text; missing or blank is None."""
    value = jsonable(value)
    if value is None:
        return None
    shown = value if isinstance(value, str) else json.dumps(value) if isinstance(value, (dict, list)) else str(value)
    return shown if shown.strip() else None


def integer(value: Any) -> int:
    """An integer cell (3, 3.0, "3"), or ValueError."""
    value = jsonable(value)
    if isinstance(value, bool):
        raise ValueError
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value.strip())
    raise ValueError


def names(value: Any, csv: bool) -> list[str]:
    """The names of a cell: a list, one name, ';'-joined names (CSV) or a JSON list (CSV)."""
    value = jsonable(value)
    if value is None:
        return []
    if isinstance(value, str):
        stripped = value.strip()
        if csv and stripped.startswith("["):
            try:
                value = json.loads(stripped)
            except json.JSONDecodeError as exc:
                raise ValueError(f"files {stripped!r} is not a valid JSON list ({exc.msg})") from None
        elif csv:
            return [n.strip() for n in stripped.split(";") if n.strip()]
        else:
            return [stripped] if stripped else []
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise ValueError(f"files must be a list of names or a single name, got {value!r}")
    return [n for n in value if n.strip()]
