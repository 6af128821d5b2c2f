"""Web search for agents: `web_search(query, max_results)` over a hosted provider or the run's offline site.

- `settings.py`: `SearchSettings`, the run's choice (`--search`, the TOML's `[search]` table), sent to
  every agent process in its AgentRequest;
- `providers.py`: the hosted providers' wire formats (tavily, serper, brave, searxng);
- `site.py`: the `site` provider (the offline `--website`, crawled and indexed once per run);
- `guard.py`: the leakage guard (`--search-block`), for search results and the browser;
- `cache.py`: searches cached per run directory;
- `env.py`: `WebSearch`, the environment the tool calls, in the agent's process on the host (the
  provider's key never enters a sandbox).
"""
