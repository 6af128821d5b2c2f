"""What a GAIA task needs, from its `Annotator Metadata`: the report's capability labels.

GAIA's metadata rows carry ``Annotator Metadata``, a dict the dataset loader keeps whole in
``Instance.metadata`` (harness/datasets/rows.py: unmapped columns go to metadata), with
``Tools`` (free text, one tool a line: "1. Web browser\\n2. Search engine\\n3. Calculator") and
``Number of steps`` (a number, as text). `labels(metadata)` turns them into:

* ``tool_family``: the families of the tools named, a sorted list (an instance counts in each of
  its families; "none" when its tools name none of them, no key without Tools). Each line of
  Tools is matched against FAMILIES, case ignored, a keyword at the start of a word:

  =============== ===========================================================================
  family          keywords
  =============== ===========================================================================
  web browsing    web, browser, search engine, google, bing, wikipedia, internet, url, website
  coding          python, code, coding, programming, script, terminal, shell, bash, grep, awk,
                  regex, compiler, pandas
  multimodality   image, video, audio, speech, sound, vision, ocr, youtube, photo, picture,
                  color, colour, screenshot, transcri, recogni
  file types      pdf, excel, spreadsheet, xlsx, csv, word, docx, powerpoint, pptx,
                  presentation, file, archive, zip, json, xml, text editor, viewer
  =============== ===========================================================================

  A line may name several ("PDF viewer or Python (pypdf)": file types and coding). Tools no
  keyword matches (a calculator, "Critical path method") name no family.
* ``steps``: the number of steps in a bucket of STEP_BUCKETS ("1-3", "4-6", "7-10", "11+"), no
  key when the number is absent or not a positive integer.

The report breaks accuracy down by both (harness/report/breakdown.py, with 95% intervals), and the
preflight warns when instances needing web browsing run with no way to the web
(harness/runner/preflight.py `unreachable_web`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

ANNOTATOR = "Annotator Metadata"
WEB = "web browsing"
FAMILIES: dict[str, tuple[str, ...]] = {
    WEB: ("web", "browser", "search engine", "google", "bing", "wikipedia", "internet", "url", "website"),
    "coding": ("python", "code", "coding", "programming", "script", "terminal", "shell", "bash", "grep", "awk",
               "regex", "compiler", "pandas"),
    "multimodality": ("image", "video", "audio", "speech", "sound", "vision", "ocr", "youtube", "photo", "picture",
                      "color", "colour", "screenshot", "transcri", "recogni"),
    "file types": ("pdf", "excel", "spreadsheet", "xlsx", "csv", "word", "docx", "powerpoint", "pptx",
                   "presentation", "file", "archive", "zip", "json", "xml", "text editor", "viewer"),
}
STEP_BUCKETS = ((1, 3), (4, 6), (7, 10), (11, None))  # inclusive bounds; None: no upper bound
NONE = "none"
_PATTERNS = {family: re.compile(r"\b(?:" + "|".join(map(re.escape, words)) + ")", re.IGNORECASE)
             for family, words in FAMILIES.items()}
_NUMBERING = re.compile(r"^\s*\d+\s*[.)]\s*")


def tool_families(tools: str) -> list[str]:
    """The families the Tools text names, sorted ([NONE] when it names none)."""
    lines = [_NUMBERING.sub("", line) for line in tools.splitlines() if line.strip()]
    found = {family for line in lines for family, pattern in _PATTERNS.items() if pattern.search(line)}
    return sorted(found) or [NONE]


def steps_bucket(steps: Any) -> str | None:
    """The bucket of a number of steps ("4" -> "4-6"), None when it is not a positive integer."""
    try:
        n = int(str(steps).strip())
    except ValueError:
        return None
    for low, high in STEP_BUCKETS:
        if n >= low and (high is None or n <= high):
            return f"{low}-{high}" if high is not None else f"{low}+"
    return None


def labels(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The instance's capability labels (the module docstring); {} without Annotator Metadata."""
    annotator = metadata.get(ANNOTATOR)
    if not isinstance(annotator, Mapping):
        return {}
    out: dict[str, Any] = {}
    if isinstance(tools := annotator.get("Tools"), str) and tools.strip():
        out["tool_family"] = tool_families(tools)
    if (bucket := steps_bucket(annotator.get("Number of steps"))) is not None:
        out["steps"] = bucket
    return out
