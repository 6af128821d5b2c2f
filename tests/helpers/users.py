"""Simulated users for `--user-function tests.helpers.users:NAME` (final_message, instance, number) -> str | None."""

from __future__ import annotations

from harness.datasets.model import Instance


def prefer_csv(final_message: str, instance: Instance, number: int) -> str | None:
    """Answers the agent's question about which file to use; says nothing to anything else."""
    if "CSV or the JSON" not in final_message:
        return None
    return f"Use the CSV file (reply {number} about {instance.instance_id}, level {instance.level})."


def silent(final_message: str, instance: Instance, number: int) -> str | None:
    """Never answers: the agent's last message stands."""
    return None


NOT_CALLABLE = "a string, not a function"


def broken(final_message: str, instance: Instance, number: int) -> str | None:
    """A simulated user with a bug of its own."""
    raise ZeroDivisionError("the user function divided by zero")


def not_text(final_message: str, instance: Instance, number: int):
    """Returns something that is neither a reply nor None."""
    return 42
