"""Whether a GAIA submission covers the split its run was drawn from (`harness export --format gaia`).

The leaderboard scores a task missing from the file as wrong, so a run of part of a split (--limit,
--level, --ids, --skip, --offset, --stride) gives a partial file: `gap` says so, with the split's
count per level and how many of each the run left out. The split is read again from run.json's
dataset (whichever of its splits holds every selected task); when it cannot be read here, the
selection flags alone say the run was partial.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from harness.datasets.load import load_dataset
from harness.errors import HarnessError

SPLITS = (None, "validation", "test")  # None: the dataset's own default


def narrowing(selection: Mapping[str, Any]) -> list[str]:
    """The selection flags of run.json's `selection` that keep part of a dataset, as written."""
    flags = []
    for key in ("ids", "skip"):
        if selection.get(key):
            flags.append(f"--{key} ({len(selection[key])} ids)")
    if selection.get("level"):
        flags.append("--level " + ",".join(map(str, selection["level"])))
    if selection.get("offset"):
        flags.append(f"--offset {selection['offset']}")
    if (selection.get("stride") or 1) > 1:
        flags.append(f"--stride {selection['stride']}")
    if selection.get("limit") is not None:
        flags.append(f"--limit {selection['limit']}")
    return flags


def split_levels(dataset: str, selected: set[str]) -> dict[str, Counter[str]] | None:
    """{"all": level -> tasks of the split, "left": level -> those not selected}, None when no split
    of `dataset` holding every selected id can be read here."""
    for split in SPLITS:
        try:
            instances = load_dataset(dataset, split).instances
        except (HarnessError, OSError, ValueError):
            continue
        if selected <= {i.instance_id for i in instances}:
            level = lambda i: str(i.level) if i.level is not None else "unknown"  # noqa: E731
            return {"all": Counter(map(level, instances)),
                    "left": Counter(level(i) for i in instances if i.instance_id not in selected)}
    return None


def gap(config: Mapping[str, Any], selected: Sequence[str]) -> str | None:
    """What a submission of these selected ids leaves out of their split, in words; None when nothing."""
    flags = narrowing(config.get("selection") or {})
    counts = split_levels(str(config.get("dataset") or ""), set(selected)) if config.get("dataset") else None
    if counts is None:
        if not flags:
            return None
        return (f"the run selected {len(selected)} task(s) with {' '.join(flags)}, not its whole split (the "
                f"dataset {config.get('dataset')!r} cannot be read here to count what is left out)")
    left = sum(counts["left"].values())
    if not left:
        return None
    per_level = ", ".join(f"level {lv} {counts['left'][lv]} of {n}" for lv, n in sorted(counts["all"].items())
                          if counts["left"][lv])
    how = f" ({' '.join(flags)})" if flags else ""
    return (f"the run selected {len(selected)} of its split's {sum(counts['all'].values())} tasks{how}: the "
            f"leaderboard scores the {left} left out wrong; missing: {per_level}")
