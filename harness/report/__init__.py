"""Aggregate result rows into a run report (JSON, a summary CSV row, a terminal table)."""

from harness.report.build import LevelStats, Report, ScorerStats, TimeStats, build_report, wilson_interval
from harness.report.output import append_summary, render, summary_row, write_report

__all__ = [
    "LevelStats",
    "Report",
    "ScorerStats",
    "TimeStats",
    "append_summary",
    "build_report",
    "render",
    "summary_row",
    "wilson_interval",
    "write_report",
]
