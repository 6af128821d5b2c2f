"""The instance contract: what a dataset hands to the rest of the pipeline."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field


class Instance(BaseModel):
    instance_id: str
    question: str
    answer: str | None = None  # the target; None when the dataset has no answers
    files: list[str] = Field(default_factory=list)  # names relative to `root`, copied to /workspace
    root: Path  # the folder the file names are relative to
    level: int | None = None
    metadata: dict = Field(default_factory=dict)
