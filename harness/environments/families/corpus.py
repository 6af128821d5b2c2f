"""search_corpus: BM25 search, inside the sandbox, over the workspace file the instance's metadata names as
its `corpus` (harness/environments/search.py)."""

from __future__ import annotations

from harness.datasets.model import Instance
from harness.environments import Environments
from harness.environments.family import Needs, Tool, ToolFamily
from harness.environments.search import SearchEnv


class Corpus(ToolFamily[None]):
    name, order = "corpus", 80
    needs = Needs(pip=("bm25s",))

    def tools(self, envs: Environments, instance: Instance | None) -> list[Tool]:
        corpus = (instance.metadata.get("corpus") if instance is not None else None) or None
        if not isinstance(corpus, str) or envs.built.get("code") is None:
            return []
        search = SearchEnv(envs.code.sandbox, envs.code.tracer, corpus)

        async def search_corpus(query: str, top_k: int = 5) -> str:
            """Search the task's document corpus (news articles) with BM25 keyword search; returns the
            top_k best passages with their article's title, source, publication date and url. Use
            specific keywords (names, places, events); search again with other words for each fact."""
            return await envs.call(search.search, query, top_k)

        return [search_corpus]
