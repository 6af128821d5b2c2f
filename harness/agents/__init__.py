"""Agents under test: a registry by name or `module:function`, and adapters per framework.

A factory is called as `factory(model_client, envs, instance, limits)` and returns
the agent (or team) to run. The core only sees `AgentOutcome`.
"""
