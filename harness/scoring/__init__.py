"""Scoring: GAIA matching, simple checks, an LLM judge, and a name registry."""

from .base import Score, ScoreContext, Scorer, ScorerError, make_score
from .gaia import GaiaScorer, gaia_match, match_kind, normalize_number, normalize_text
from .judge import DEFAULT_RUBRIC, LLMJudgeScorer, build_judge_prompt, parse_verdict
from .registry import get_scorer, scorers
from .scorers import BudgetScorer, ExactMatchScorer, ExpectedToolCallScorer

__all__ = [
    "DEFAULT_RUBRIC",
    "BudgetScorer",
    "ExactMatchScorer",
    "ExpectedToolCallScorer",
    "GaiaScorer",
    "LLMJudgeScorer",
    "Score",
    "ScoreContext",
    "Scorer",
    "ScorerError",
    "build_judge_prompt",
    "gaia_match",
    "get_scorer",
    "make_score",
    "match_kind",
    "normalize_number",
    "normalize_text",
    "parse_verdict",
    "scorers",
]
