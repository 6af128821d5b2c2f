"""What makes two runs' model calls comparable, read back from their traces (the `model_call` events'
response_model, fingerprint and sampling: harness/models/tap.py; the `judge_call` events' response_model and
fingerprint) and run.json (the model section, the
scorers and the judge's section).

`identity(run_dir)`: the model ids the replies named, the fingerprints, the sampling sent, per model label (a
judge's calls, the `judge_call` events, under "judge NAME").
`call_differences(a, b, run_a, run_b)`: in words, what differs between two runs: an alias re-pointed (the
same section's model answered as another model id), another build (fingerprints), other sampling,
another judge (the scorers or the judge's section).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.results.layout import RunDir

_CALLS = ("model_call", "judge_call")


def identity(run_dir: Path) -> dict[str, dict[str, list]]:
    """Per model label: the sorted model ids its replies named, fingerprints and distinct sampling sent."""
    found: dict[str, dict[str, set]] = {}
    traces = RunDir(Path(run_dir)).traces
    for path in sorted(traces.glob("*.jsonl")) if traces.is_dir() else []:
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            if '"model_call"' not in line and '"judge_call"' not in line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if not isinstance(event, dict) or event.get("type") not in _CALLS or event.get("cached"):
                continue
            label = str(event.get("model") or "")
            if event["type"] == "judge_call":  # a judge's calls under its own label: its alias may move alone
                label = f"judge {event.get('judge') or ''}".strip()
            seen = found.setdefault(label, {"models": set(), "fingerprints": set(), "sampling": set()})
            if event.get("response_model"):
                seen["models"].add(str(event["response_model"]))
            if event.get("fingerprint"):
                seen["fingerprints"].add(str(event["fingerprint"]))
            if isinstance(event.get("sampling"), dict):
                seen["sampling"].add(json.dumps(event["sampling"], sort_keys=True))
    return {label: {key: sorted(values) for key, values in seen.items()} for label, seen in found.items()}


def _judge(run: dict[str, Any]) -> list[str]:
    return [s for s in run.get("scorers") or [] if "judge" in str(s)]


def call_differences(a: dict[str, dict[str, list]], b: dict[str, dict[str, list]], run_a: dict[str, Any],
                     run_b: dict[str, Any]) -> list[str]:
    """What differs between two runs' calls (identities from `identity`, run.json of each), in words."""
    out: list[str] = []
    alias = [(run_a.get("model_settings") or {}).get("model"), (run_b.get("model_settings") or {}).get("model")]
    for label in sorted(set(a) & set(b)):
        judge = label.startswith("judge")
        name = f"{label}'s model" if judge else f"model {label}"
        ma, mb = a[label]["models"], b[label]["models"]
        if ma and mb and ma != mb:
            asked = f" (both asked for {alias[0]!r})" if alias[0] and alias[0] == alias[1] and not judge else ""
            out.append(f"{name} answered as {', '.join(ma)} in the first run and {', '.join(mb)} in the "
                       f"second{asked}: the alias was re-pointed")
        fa, fb = a[label]["fingerprints"], b[label]["fingerprints"]
        if fa and fb and fa != fb:
            out.append(f"{name}: system_fingerprint {', '.join(fa)} vs {', '.join(fb)} (another build)")
        sa, sb = a[label]["sampling"], b[label]["sampling"]
        if sa and sb and sa != sb:
            out.append(f"model {label}: sampling sent {'; '.join(sa)} vs {'; '.join(sb)}")
    if alias[0] != alias[1] and all(alias):
        out.append(f"another model: {alias[0]} vs {alias[1]}")
    judges = [_judge(run_a), _judge(run_b)]
    if judges[0] != judges[1]:
        out.append(f"another judge: {', '.join(judges[0]) or 'none'} vs {', '.join(judges[1]) or 'none'}")
    return out
