"""How a Gaia2 scenario's agent works: the prompt's {conventions} (the scenario's file is the driver's, never
named to the agent: it holds the oracle's actions, and the driver removes it from the sandbox once read)."""

RULES = """How to work (Gaia2 conventions):
- You act for the user through the apps' tools; the user's next messages and the apps' notifications arrive in
  the tools' results.
- Answer the user with AgentUserInterface__send_message_to_user: what you did and what they asked to know. The task
  is judged by your actions in the apps, not by your last words.
- When the user has no further request, end with <solution>done</solution>."""
