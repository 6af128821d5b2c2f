"""The simulated user (the seed system's `user_response_fn`).

When the agent ends its turn without an answer in <solution> tags (it asks the user a
question, or just stops), the user answers: by default with a fixed reply telling it to
carry on alone; with `--user-function module:function`, with whatever that function
returns for (final_message, instance, number); None means "no reply", and the last
message stands. At most `max_replies` replies per instance.
"""

from __future__ import annotations

from typing import Callable

from harness.agents.contract import UserSimulation
from harness.agents.registry import load
from harness.answers import SOLUTION
from harness.datasets.model import Instance
from harness.errors import InputError

ReplyFn = Callable[[str, Instance, int], "str | None"]


def reply_function(user: UserSimulation) -> ReplyFn:
    """The function that answers for the user (checked: an input error when it cannot be loaded)."""
    if user.function is None:
        return lambda final_message, instance, number: user.reply
    fn = load(user.function, "--user-function")
    if not callable(fn):
        raise InputError(f"--user-function {user.function}: not callable")
    return fn


def wants_reply(final_message: str) -> bool:
    """An agent turn that ended without an answer in <solution> tags."""
    return not SOLUTION.search(final_message or "")
