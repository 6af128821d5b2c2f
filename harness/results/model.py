"""The result-row contract: one row per instance in DIR/output.jsonl."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from harness.answers import Source
from harness.errors import ErrorKind
from harness.models.replay import ReplayCheck
from harness.usage import Usage

# ok: the agent finished; limit: it hit a limit (still scored); error: it could not finish
Status = Literal["ok", "limit", "error"]


class ResultRow(BaseModel):
    instance_id: str
    epoch: int = 1  # with --epochs K: which of the K runs of the instance (rows are keyed by id and epoch)
    attempt: int = 1  # how many sandboxes this instance used (infra retries add attempts)
    status: Status
    # What the row was made from (harness/results/integrity.py): the instance's content hash and the
    # dataset's fingerprint, so rows copied into another dataset's run are refused (None: older rows)
    instance_hash: str | None = None
    dataset: str | None = None
    error_kind: ErrorKind | None = None  # a closed set (harness.errors); set when status is "error"
    error: str | None = None
    limit: str | None = None  # wall_time / max_steps / max_tokens / disk (a writable root past --disk)
    answer: str | None = None
    answer_source: Source = "none"
    target: str | None = None
    level: int | None = None
    correct: bool | None = None  # the primary scorer's verdict
    # why the instance is not scored (its target is absent or a placeholder: harness/scoring/apply.py
    # unscored_reason); correct is then None whatever the status
    unscored: str | None = None
    scores: dict[str, dict[str, Any]] = Field(default_factory=dict)  # scorer name -> Score.model_dump()
    usage: Usage = Field(default_factory=Usage)
    # The LLM judge's calls for this row, every scoring of it added up (`harness run`, then each
    # `harness score`); each verdict's own call is in its score's details["usage"]
    judge_usage: Usage = Field(default_factory=Usage)
    steps: int = 0
    tool_calls: list[str] = Field(default_factory=list)
    user_replies: int = 0  # replies of the simulated user (turns that ended without <solution>)
    # model replies that were a tool call written as text (models/textcalls.py: the trace's model_call
    # events that name one): the server has no tool-call parser on
    text_tool_calls: int = 0
    # model replies cut at a token cap (the trace's model_call events with finish_reason "length": the
    # server's own cap, or the section's max_tokens)
    cut_replies: int = 0
    duration_s: float = 0.0
    started_at: str = ""
    finished_at: str = ""
    sandbox: str | None = None
    trace: str | None = None  # path of the trace file, relative to the output dir
    # environment actions of the row's trace (its last attempt): env (code/file/web) -> outcome
    # (ok/nonzero_exit/timeout/crashed/error) -> count; counted by the runner from the trace's `env` events
    env_outcomes: dict[str, dict[str, int]] = Field(default_factory=dict)
    replay: ReplayCheck | None = None  # replay models: the tool results checked against the recording
    # what a tool family's environment judged of the run (Gaia2: ARE's verdict), by family: what the scorers
    # read (ScoreContext.verdicts), on a rescore too
    verdicts: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @property
    def finished(self) -> bool:
        """Done for resume purposes: errors are retried on the next run, limits are not."""
        return self.status != "error"
