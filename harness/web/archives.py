"""Whether a recorded web archive can be replayed as it was written, read once before any container.

`archive_problem(path)` reads a `.warc.gz` through: every gzip member whole (its CRC and length as written:
a file cut short ends inside one, a flipped byte fails the check), every record a WARC record warcio reads,
and the last exchange whole (the proxy and the search recorder write a request, then its response: a file
ending on a request was cut between the two). A file cut exactly between two exchanges cannot be told from a
shorter recording. Before, a file cut in half replayed its first half with misses for the rest, and a damaged
one stopped the replay proxy with warcio's traceback (exit 1).
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path


def archive_problem(path: Path) -> str | None:
    """What is wrong with the archive at `path` (a phrase: "cut short: ..."), or None when it reads whole.
    Two passes: warcio's records (it takes a gzip stream that ends early for the end of the file), then the
    gzip members alone."""
    from warcio.archiveiterator import ArchiveIterator
    from warcio.exceptions import ArchiveLoadFailed

    whole, last = 0, None
    try:
        with path.open("rb") as raw:
            for record in ArchiveIterator(raw):
                whole, last = whole + 1, record.rec_type
        with gzip.open(path, "rb") as unpacked:
            while unpacked.read(1 << 20):
                pass
    except EOFError:
        return f"cut short: it ends inside a record, after {whole} whole record(s)"
    except (gzip.BadGzipFile, zlib.error) as exc:
        return f"damaged: its gzip data fail their check after {whole} whole record(s) ({exc})"
    except (ArchiveLoadFailed, ValueError):
        return f"damaged: record {whole + 1} is not a WARC record warcio can read"
    except OSError as exc:
        return f"unreadable: {exc}"
    if last == "request":
        return f"cut short: its last request (record {whole}) has no response"
    return None
