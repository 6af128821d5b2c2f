"""The output directory must lie outside every folder a run packs into containers.

An instance's folder attachment is packed whole into its sandbox (harness/sandbox/files.py),
and `--website`'s folder into the site's container. A run directory inside one of them would be
packed into later instances' containers as it grows: other agents' request files (live sandbox
tokens) and finished traces (targets in their verdict events). So `check_output_outside` refuses
that layout before any container starts (InputError, exit 2), naming both paths.

Everything packed for an instance lies inside its dataset root (symlinks are followed only
there), so an output directory outside every root is accepted without looking at a single
attachment; only one inside a root has that root's folder attachments resolved.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from harness.datasets.model import Instance
from harness.errors import InputError
from harness.fsutil import inside


def check_output_outside(instances: Iterable[Instance], output_dir: Path, website: Path | None = None) -> None:
    """Raise InputError when output_dir is (inside) a folder attachment of an instance or the
    --website folder."""
    out = Path(output_dir).resolve()
    if website is not None and inside(Path(website).resolve(), out):
        raise InputError(f"--output-dir {output_dir} is inside --website {website}: the run's own files "
                         f"would be packed into the site's container; choose an output directory outside it")
    instances = list(instances)
    for root in dict.fromkeys(inst.root for inst in instances):  # most datasets have one root
        real_root = Path(root).resolve()
        if not inside(real_root, out):
            continue
        seen: set[str] = set()
        for inst in (i for i in instances if i.root == root):
            for name in inst.files:
                if name in seen:
                    continue
                seen.add(name)
                folder = (real_root / name).resolve()
                if folder.is_dir() and inside(folder, out):
                    raise InputError(
                        f"--output-dir {output_dir} is inside {folder}, which instance {inst.instance_id} "
                        f"attaches (files: {name!r}): the run's own files (sandbox tokens, traces with "
                        f"targets) would be packed into later sandboxes; choose an output directory outside it")
