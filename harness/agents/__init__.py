"""Agents under test, behind the agent-runner contract (contract.py).

`registry.py` turns `--agent NAME` into an AgentRunner: built-in names, an AgentRunner
subclass by `module:Class`, or an AutoGen factory by `module:function`. Each framework
lives in its own folder (autogen/, plain/); the core sees only AgentRequest/AgentResult
and the harness's own trace events. `user.py` is the simulated user.
"""
