"""The agent-process layer: how the harness starts, waits for, kills and reads a running agent.

- `process.py`: the protocol (`AgentProcess`), its two implementations (forked from the run's fork
  server, or a fresh interpreter) and `start`, the one start path;
- `forkserver.py`: the fork server's process (preloads once per run, forks each agent process);
  `servers.py`: the harness's side, a run's servers held by a `ForkServers` object;
- `supervise.py`: one attempt's agent run to its end under the wall-clock limit, every running agent
  killed at once on Ctrl-C;
- `lifeline.py`: death with the parent, for the agent process and the fork server alike.

This file imports nothing, so `lifeline` costs a fresh agent process no imports before it takes effect.
"""
