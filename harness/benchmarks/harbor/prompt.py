"""How a Harbor task's agent works: the prompt's {conventions} (its verifier judges the sandbox, not the reply)."""

RULES = """How to work:
- Do the task in the sandbox with your tools: when you finish, the task's tests run in the sandbox and judge what
  you did there, not your reply.
- When you are done, end with a one-line summary inside <solution></solution>."""
