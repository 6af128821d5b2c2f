"""Choose which instances of a dataset to run: by id, by level, skipping, shuffled, sharded, limited."""

from __future__ import annotations

import random
from collections.abc import Sequence

from harness.datasets.model import Instance
from harness.errors import InputError


def _unknown(flag: str, wanted: Sequence[str], known: set[str]) -> None:
    missing = sorted({i for i in wanted if i not in known})
    if missing:
        more = f" and {len(missing) - 20} more" if len(missing) > 20 else ""
        shown = ", ".join(repr(i) for i in missing[:20]) + more
        raise InputError(f"{flag}: {len(missing)} unknown instance id(s): {shown}")


def _unknown_levels(wanted: Sequence[int], known: set[int | None]) -> None:
    missing = sorted(set(wanted) - known)
    if missing:
        levels = ", ".join(str(n) for n in sorted(n for n in known if n is not None)) or "none"
        raise InputError(f"--level {','.join(map(str, wanted))}: no instance has level "
                         f"{', '.join(map(str, missing))} (the dataset's levels: {levels})")


def select(
    instances: Sequence[Instance],
    *,
    ids: list[str] | None = None,
    skip: list[str] | None = None,
    level: Sequence[int] | None = None,
    offset: int = 0,
    stride: int = 1,
    shuffle: bool = False,
    seed: int = 0,
    limit: int | None = None,
) -> list[Instance]:
    """Filter by `ids` and `level` (GAIA's levels), drop `skip`, shuffle (deterministic per `seed`),
    take `[offset::stride]`, then `limit`.

    `stride` N with `offset` 0..N-1 splits the selection into N disjoint shards covering it.
    """
    if offset < 0:
        raise InputError(f"--offset must be >= 0 (got {offset})")
    if stride < 1:
        raise InputError(f"--stride must be >= 1 (got {stride})")
    if limit is not None and limit < 0:
        raise InputError(f"--limit must be >= 0 (got {limit})")
    known = {i.instance_id for i in instances}
    chosen = list(instances)
    if ids is not None:
        _unknown("--ids", ids, known)
        wanted = set(ids)
        chosen = [i for i in chosen if i.instance_id in wanted]
    if level is not None:
        _unknown_levels(level, {i.level for i in instances})
        wanted_levels = set(level)
        chosen = [i for i in chosen if i.level in wanted_levels]
    if skip:
        _unknown("--skip", skip, known)
        dropped = set(skip)
        chosen = [i for i in chosen if i.instance_id not in dropped]
    if shuffle:
        random.Random(seed).shuffle(chosen)
    chosen = chosen[offset::stride]
    return chosen if limit is None else chosen[:limit]
