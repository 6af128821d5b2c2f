"""Docker Swarm sandboxes (`--sandbox swarm`): one single-replica service per sandbox.

The engine the harness talks to (DOCKER_HOST, or the local socket) must be a manager of
the swarm; the scheduler places each sandbox on a node, and sandboxd answers on the port
that node publishes (host mode). See provider.py for the rules, and what swarm cannot do
that the docker provider does.
"""
