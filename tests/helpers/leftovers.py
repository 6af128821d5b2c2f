"""The harness containers a finished test suite left behind: `python -m tests.helpers.leftovers`.

scripts/test.sh runs it after pytest has ended, so every container the suite made has an owner that is gone
(harness/sandbox/docker/naming.py: the owner label). A container whose owner still runs belongs to another
harness or suite on this machine (a second checkout's tests, a run beside them) and is not ours to count;
one without an owner label, or whose owner cannot be judged, is counted. Prints one line per container and
exits 1 when there is any."""

from __future__ import annotations

import sys

from harness.sandbox.docker import engine, naming


def leftovers() -> list[str]:
    found = []
    for container in engine.client().containers.list(all=True, filters={"label": f"{naming.LABEL_MANAGED}=1"}):
        owner = container.labels.get(naming.LABEL_OWNER)
        if owner is None or naming.owner_alive(owner) is not True:
            found.append(f"{container.short_id} {container.status} {container.image.tags} owner={owner}")
    return found


if __name__ == "__main__":
    left = leftovers()
    for line in left:
        print(line)
    sys.exit(1 if left else 0)
