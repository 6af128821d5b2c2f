"""The agent-process layer: how the harness starts, waits for, kills and reads a running agent.

- `process.py`: the protocol (`AgentProcess`), its two implementations (forked from the run's fork
  server, or a fresh interpreter) and `start`, the one start path;
- `supervise.py`: one attempt's agent run to its end under the wall-clock limit, every running agent
  killed at once on Ctrl-C;
- `lifeline.py`: death with the parent, for the agent process and the fork server alike.

This file imports nothing, so `lifeline` costs a fresh agent process no imports before it takes effect.
"""
