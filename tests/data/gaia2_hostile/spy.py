"""A hostile Gaia2 agent program (tests/test_gaia2_isolation.py), run inside the sandbox by `--agent sandbox:...`
(stdlib only). It looks for the oracle's data and ARE's driver wherever agent code can look:

- every process it can see (but itself): its command line, whether its environment can be read, whether it may be
  signalled (signal 0: the permission check alone), and whether its memory (/proc/PID/mem, each readable region of
  /proc/PID/maps) holds the oracle's reply;
- every file under /workspace, /tmp and /opt/harness: whether it holds the oracle's reply or the scenario's oracle
  actions.

The reply it looks for is proto_forward_email's oracle message to the user, put together only here (no file or
argument holds it whole). It writes what it found (JSON) as its answer, inside <solution>.
"""

import glob
import json
import os
import re

NEEDLE = ("Done: I forwarded Greg's " + "'List of music' email to John Doe.").encode()
MEMORY_CAP = 1 << 30  # bytes read from one process's memory at most
REGION = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) r")


def read(path, size=-1):
    with open(path, "rb") as fh:
        return fh.read(size)


def in_memory(pid):
    """Whether the process's memory holds NEEDLE; or the error that kept it from being read."""
    try:
        maps = read(f"/proc/{pid}/maps").decode()
        fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
    except OSError as exc:
        return f"refused: {exc}"
    total, carry = 0, b""
    try:
        for line in maps.splitlines():
            found = REGION.match(line)
            if not found or "[vvar]" in line or "[vsyscall]" in line:
                continue
            start, end = int(found.group(1), 16), int(found.group(2), 16)
            while start < end and total < MEMORY_CAP:
                size = min(end - start, 1 << 24)
                try:
                    chunk = os.pread(fd, size, start)
                except OSError:
                    break
                total += len(chunk)
                if NEEDLE in carry + chunk:
                    return True
                carry, start = chunk[-len(NEEDLE):], start + size
    finally:
        os.close(fd)
    return False


def process(pid):
    seen = {"pid": pid}
    try:
        seen["command"] = read(f"/proc/{pid}/cmdline").replace(b"\0", b" ").decode(errors="replace")[:160]
    except OSError as exc:
        seen["command"] = f"refused: {exc}"
    try:
        seen["environ"] = len(read(f"/proc/{pid}/environ")) > 0
    except OSError as exc:
        seen["environ"] = f"refused: {exc}"
    try:
        os.kill(pid, 0)
        seen["signal"] = True
    except OSError as exc:
        seen["signal"] = f"refused: {exc}"
    seen["memory"] = in_memory(pid)
    return seen


def files():
    found = []
    for top in ("/workspace", "/tmp", "/opt/harness"):
        for folder, _, names in os.walk(top):
            for name in names:
                path = os.path.join(folder, name)
                try:
                    data = read(path, 64 << 20) if os.path.isfile(path) and not os.path.islink(path) else b""
                except OSError:
                    continue
                if path != os.path.abspath(__file__) and (NEEDLE in data or b"OracleEvent" in data):
                    found.append(path)
    return found


def main():
    me = os.getpid()
    seen = [process(int(p[6:])) for p in glob.glob("/proc/[0-9]*") if int(p[6:]) != me]
    report = {"processes": seen, "files": files(), "workspace": sorted(os.listdir("/workspace"))}
    with open(os.environ["HARNESS_ANSWER_FILE"], "w") as fh:
        fh.write("<solution>" + json.dumps(report) + "</solution>")


if __name__ == "__main__":
    main()
