"""The simulated user (the seed system's `user_response_fn`).

When the agent ends its turn without an answer in <solution> tags (it asks the user a
question, or just stops), the user answers: by default with a fixed reply telling it to
carry on alone; with `--user-function module:function`, with whatever that function
returns for (final_message, instance, number); None means "no reply", and the last
message stands. At most `max_replies` replies per instance. A user function that raises or
returns something else than a str or None is an input error, not the agent's.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.agents.contract import UserSimulation
from harness.answers import SOLUTION
from harness.datasets.model import Instance
from harness.errors import InputError
from harness.plugins import load

ReplyFn = Callable[[str, Instance, int], "str | None"]


def reply_function(user: UserSimulation) -> ReplyFn:
    """The function that answers for the user (checked: an input error when it cannot be loaded)."""
    if user.function is None:
        return lambda final_message, instance, number: user.reply
    fn = load(user.function, "--user-function")
    if not callable(fn):
        raise InputError(f"--user-function {user.function}: not callable")

    def reply(final_message: str, instance: Instance, number: int) -> str | None:
        # The simulated user is the run's configuration, not the agent under test: its failures are
        # input errors (recorded, not retried), never charged to the agent.
        try:
            answer = fn(final_message, instance, number)
        except Exception as exc:  # noqa: BLE001
            raise InputError(f"--user-function {user.function} raised {type(exc).__name__}: {exc}") from exc
        if answer is not None and not isinstance(answer, str):
            raise InputError(f"--user-function {user.function} returned {type(answer).__name__}, "
                             "not a reply (str) or None")
        return answer

    return reply


def wants_reply(final_message: str) -> bool:
    """An agent turn that ended without an answer in <solution> tags."""
    return not SOLUTION.search(final_message or "")
