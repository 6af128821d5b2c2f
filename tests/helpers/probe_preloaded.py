"""Imported by the fork server for tests.helpers.runners:LeakProbe (its `preload`); a fresh agent
process imports it only when the probe asks."""

STATE = {"counter": 0}
