"""`--level 1,2`: GAIA's levels, composed with the other selection flags; a bad value is exit 2 naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.datasets import select
from harness.datasets.model import Instance
from harness.errors import InputError
from tests.helpers.e2e import explain, harness, out_dir

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "datasets" / "gaia-smoke"


def instances() -> list[Instance]:
    return [Instance(instance_id=f"i{n}", question="q", root=Path("."), level=1 + n % 3) for n in range(12)]


def ids(chosen: list[Instance]) -> list[str]:
    return [i.instance_id for i in chosen]


def test_levels_select_and_compose_with_ids_skip_shuffle_shards_and_limit():
    every = instances()
    assert ids(select(every, level=[1, 3])) == ["i0", "i2", "i3", "i5", "i6", "i8", "i9", "i11"]
    assert ids(select(every, level=[2], ids=["i1", "i2", "i4"])) == ["i1", "i4"]
    assert ids(select(every, level=[2], skip=["i4"])) == ["i1", "i7", "i10"]
    shards = [ids(select(every, level=[1, 2], offset=k, stride=2)) for k in (0, 1)]
    assert sorted(shards[0] + shards[1]) == sorted(ids(select(every, level=[1, 2])))
    assert not set(shards[0]) & set(shards[1])
    shuffled = ids(select(every, level=[3], shuffle=True, seed=4))
    assert sorted(shuffled) == ["i11", "i2", "i5", "i8"] and shuffled == ids(select(every, level=[3], shuffle=True,
                                                                                     seed=4))
    assert len(select(every, level=[1], limit=2)) == 2


def test_a_level_no_instance_has_is_refused_naming_the_flag_and_the_levels_there():
    with pytest.raises(InputError, match=r"--level 1,4: no instance has level 4 \(the dataset's levels: 1, 2, 3\)"):
        select(instances(), level=[1, 4])


@pytest.mark.parametrize(("value", "message"), [
    ("1,x", "--level x: Input should be a valid integer"),
    ("5", "--level 5: no instance has level 5"),
])
def test_a_bad_level_is_exit_2_before_any_container(tmp_path, value, message):
    proc = harness("run", "--dataset", SMOKE, "--split", "validation", "--model", "replay", "--level", value,
                   "--output-dir", out_dir(tmp_path))
    assert proc.returncode == 2 and message in proc.stderr, explain(proc)
    assert "Traceback" not in proc.stderr
