"""harness: evaluate LLM agents on GAIA-style tasks, one Docker sandbox per instance."""

__version__ = "0.1.0"
