"""How a Harbor task's agent works: the prompt's {conventions} (its verifier judges the sandbox, not the reply)."""

RULES = """How to work:
- Do the task in the sandbox with your tools: tests run in the sandbox after you finish judge it, not your reply.
- When you are done, end with a one-line summary inside <solution></solution>."""
