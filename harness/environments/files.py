"""The file environment: workspace files as markdown (markitdown, run inside the sandbox).

Conversion happens in the container, so agent-chosen paths and file contents never
reach a parser on the host. Paths are confined to /workspace (no '..', no symlink
escape: the real path is checked inside the container). Conversions are cached
per file (path, size, mtime) and served in pages. A conversion that outlasts
CONVERT_TIMEOUT_S is killed and reported as a `timeout` naming the limit; one that dies
without a word is reported with its exit code, never with an empty reason.
"""

from __future__ import annotations

import json
import time

from harness.environments.paging import find_hits, page_count, page_of
from harness.sandbox.contract import WORKSPACE, Sandbox
from harness.traces import EnvAction, Tracer

CONVERT_TIMEOUT_S = 120.0  # one conversion (markitdown's import included)


class ConvertTimeout(ValueError):
    """The conversion was killed at CONVERT_TIMEOUT_S."""


# Both in-container scripts start with this: sys.argv[1] resolved (symlinks too) and confined
# to the workspace, inside the container, where the files really are.
CONFINE = r"""
import json, os, sys
root = "/workspace"
real = os.path.realpath(os.path.join(root, sys.argv[1]))
def out(**kw):
    print(json.dumps(kw)); sys.exit(0)
if os.path.commonpath([root, real]) != root:
    out(error=f"{sys.argv[1]!r} is outside {root}")
"""

CONVERT = CONFINE + r"""
if not os.path.exists(real):
    out(error=f"no such file: {sys.argv[1]!r}")
if os.path.isdir(real):
    out(error=f"{sys.argv[1]!r} is a directory; list it instead")
st = os.stat(real)
key = f"{real}:{st.st_size}:{st.st_mtime_ns}"
if len(sys.argv) > 2 and sys.argv[2] == key:
    out(path=real, key=key, cached=True)
try:
    from markitdown import MarkItDown
    result = MarkItDown().convert(real)
    text = getattr(result, "markdown", None) or result.text_content
except Exception as exc:
    out(error=f"cannot convert {sys.argv[1]!r}: {type(exc).__name__}: {exc}"[:2000])
out(path=real, key=key, markdown=text)
"""

LIST = CONFINE + r"""
for dirpath, dirs, files in os.walk(real):
    dirs.sort()
    for name in sorted(files):
        full = os.path.join(dirpath, name)
        info = os.lstat(full)
        kind = f"-> {os.readlink(full)}" if os.path.islink(full) else f"{info.st_size} bytes"
        print(f"{os.path.relpath(full, root)}\t{kind}")
"""


class FileEnv:
    def __init__(self, sandbox: Sandbox, tracer: Tracer, *, page_size: int = 8000):
        self.sandbox, self.tracer, self.page_size = sandbox, tracer, page_size
        self._cache: dict[str, tuple[str, str]] = {}  # requested path -> (key, markdown)

    def _trace(self, action: str, args: dict, started: float, outcome: str | None = None, **result) -> None:
        outcome = outcome or ("error" if "error" in result else "ok")
        self.tracer.emit(EnvAction(env="file", action=action, args=args, outcome=outcome,
                                   seconds=round(time.monotonic() - started, 4), **result))

    def list_files(self, path: str = ".") -> str:
        started = time.monotonic()
        result = self.sandbox.exec(["python3", "-c", LIST, path], timeout=30)
        text = result.stdout.strip() or "(no files)"
        try:  # CONFINE refused the path with one JSON line
            text = "Error: " + json.loads(text)["error"]
        except (ValueError, KeyError, TypeError):
            pass
        self._trace("list_files", {"path": path}, started, result=text[:2000])
        return text

    def markdown(self, path: str) -> str:
        """The whole document as markdown; raises ValueError with a clear message on failure."""
        rel = path[len(WORKSPACE) + 1 :] if path.startswith(WORKSPACE + "/") else path
        cached = self._cache.get(rel)
        argv = ["python3", "-c", CONVERT, rel] + ([cached[0]] if cached else [])
        result = self.sandbox.exec(argv, timeout=CONVERT_TIMEOUT_S, max_output=16 * 1024 * 1024)
        if result.timed_out:
            raise ConvertTimeout(f"timeout: converting {path!r} took longer than the {CONVERT_TIMEOUT_S:g} s limit")
        try:
            data = json.loads(result.stdout.strip().splitlines()[-1])
        except (json.JSONDecodeError, IndexError):
            reason = result.stderr.strip()[-1000:] or f"the converter exited {result.exit_code} without a message"
            raise ValueError(f"cannot convert {path!r}: {reason}") from None
        if "error" in data:
            raise ValueError(data["error"])
        if data.get("cached") and cached is not None:  # it answers cached only when given cached's key
            return cached[1]
        self._cache[rel] = (data["key"], data["markdown"])
        return data["markdown"]

    def read(self, path: str, page: int = 1) -> str:
        started = time.monotonic()
        try:
            text = self.markdown(path)
        except ValueError as exc:
            self._trace("read", {"path": path, "page": page}, started, _outcome(exc), error=str(exc))
            return f"Error: {exc}"
        pages = page_count(text, self.page_size)
        page = min(max(1, page), pages)
        self._trace("read", {"path": path, "page": page}, started, pages=pages, chars=len(text))
        return f"[{path}: page {page} of {pages}]\n{page_of(text, self.page_size, page)}"

    def find(self, path: str, query: str) -> str:
        started = time.monotonic()
        try:
            text = self.markdown(path)
        except ValueError as exc:
            self._trace("find", {"path": path, "query": query}, started, _outcome(exc), error=str(exc))
            return f"Error: {exc}"
        hits = find_hits(text, query, self.page_size)
        self._trace("find", {"path": path, "query": query}, started, hits=len(hits))
        return "\n".join(hits) if hits else f"{query!r} not found in {path}"


def _outcome(exc: ValueError) -> str:
    return "timeout" if isinstance(exc, ConvertTimeout) else "error"
