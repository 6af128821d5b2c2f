"""Agents that are programs of their own, run inside the sandbox (`--agent sandbox:COMMAND`).

`runner.py` is the AgentRunner; `proxy.py` the per-instance model proxy on the host (the real key
stays there, calls go through the instance's Meter); `tools.py` the instance's tools as an MCP server
on the host; `relay.py` carries the agent's HTTP requests from a loopback port inside the sandbox to
those two through `Sandbox.exec` alone; `wire.py` maps the OpenAI chat and Anthropic Messages wire
formats onto the harness's chat model.
"""
