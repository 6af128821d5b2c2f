"""The runner: the top of the data flow. It drives dataset → instance → sandbox → agent → answer →
score → result row → report; the stages below it (datasets, sandbox, agents, scoring, results, report)
never import it (pyproject.toml's import-linter contracts hold them to that)."""
