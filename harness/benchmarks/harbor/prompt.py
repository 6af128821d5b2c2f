"""How a Harbor task's agent works: the prompt's {conventions} (its verifier judges the sandbox, not the reply)."""

RULES = """How to work:
- Do the task in the sandbox with your tools: when you finish, the task's tests run in the sandbox and judge what
  you did there, not your reply.
- When you are done, end with a one-line summary inside <solution></solution>."""

SYSTEM = (  # {workdir}: the task image's working directory
    "You do tasks with tools that run inside a sandbox, a Linux machine whose working directory is {workdir}. "
    "Run commands and edit files there with the tools instead of guessing; the task's tests then check the "
    "sandbox's state, not your reply. When you are done, reply with a one-line summary."
)
