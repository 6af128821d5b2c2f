"""The search environment: BM25 over a task's document corpus, indexed inside the sandbox.

The corpus is a workspace file (a JSON list of ``{title, body, url, source, published_at, ...}``,
MultiHop-RAG's ``corpus.json`` layout). The in-container script splits each body into passages
of about ``PASSAGE_WORDS`` words, indexes them with bm25s (the image's toolbox), caches the index
in the sandbox's /tmp (keyed by the corpus file's path, size and mtime) and returns the best
passages with their article's title, url, source and date. Nothing of the corpus is parsed on
the host. Each search is one ``env`` trace event (env "search", action "search_corpus") whose
``results`` list the title and url of every passage returned: retrieval recall is read from it.
"""

from __future__ import annotations

import json
import time

from harness.environments.files import CONFINE
from harness.sandbox.contract import Sandbox
from harness.traces import EnvAction, Tracer

PASSAGE_WORDS = 150
MAX_TOP_K = 20

SEARCH = CONFINE + r"""
import hashlib, pickle
query, top_k, size = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if not os.path.isfile(real):
    out(error=f"no corpus at {sys.argv[1]!r}")
try:
    import bm25s
except ImportError:
    out(error="bm25s is not installed in this sandbox image (rebuild it: harness images build)")
st = os.stat(real)
key = hashlib.sha256(f"{real}:{st.st_size}:{st.st_mtime_ns}:{size}".encode()).hexdigest()[:16]
cache = f"/tmp/harness-bm25-{key}.pkl"
try:
    with open(cache, "rb") as fh:
        retriever, passages = pickle.load(fh)
except (OSError, pickle.UnpicklingError, EOFError):
    with open(real, encoding="utf-8") as fh:
        docs = json.load(fh)
    passages = []
    for doc in docs if isinstance(docs, list) else []:
        if not isinstance(doc, dict):
            continue
        meta = {k: doc.get(k) for k in ("title", "url", "source", "published_at")}
        words = str(doc.get("body", "")).split()
        for start in range(0, max(len(words), 1), size):
            passages.append({**meta, "text": " ".join(words[start:start + size])})
    if not passages:
        out(error=f"{sys.argv[1]!r} holds no articles (expected a JSON list of {{title, body, ...}})")
    texts = [f"{p['title'] or ''} {p['text']}" for p in passages]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    with open(cache + ".tmp", "wb") as fh:
        pickle.dump((retriever, passages), fh)
    os.replace(cache + ".tmp", cache)
tokens = bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)
if not tokens[0]:
    out(results=[])
ids, scores = retriever.retrieve(tokens, k=min(top_k, len(passages)), show_progress=False)
out(results=[{**passages[int(i)], "score": round(float(s), 3)} for i, s in zip(ids[0], scores[0]) if s > 0])
"""


def format_hits(query: str, hits: list[dict]) -> str:
    """How search results read to a model: one numbered block per passage."""
    if not hits:
        return f"No passage of the corpus matches {query!r}."
    blocks = [f"{len(hits)} passage(s) for {query!r}:"]
    for rank, hit in enumerate(hits, start=1):
        blocks.append(f"[{rank}] {hit.get('title')}\n    source: {hit.get('source')}, published: "
                      f"{hit.get('published_at')}\n    url: {hit.get('url')}\n    {hit.get('text')}")
    return "\n\n".join(blocks)


class SearchEnv:
    def __init__(self, sandbox: Sandbox, tracer: Tracer, corpus: str, *, passage_words: int = PASSAGE_WORDS):
        self.sandbox, self.tracer, self.corpus, self.passage_words = sandbox, tracer, corpus, passage_words

    def search(self, query: str, top_k: int = 5) -> str:
        started = time.monotonic()
        top_k = min(max(1, int(top_k)), MAX_TOP_K)
        args = {"query": query, "top_k": top_k, "corpus": self.corpus}
        result = self.sandbox.exec(["python3", "-c", SEARCH, self.corpus, query, str(top_k),
                                    str(self.passage_words)], timeout=300, max_output=8 * 1024 * 1024)
        try:
            data = json.loads(result.stdout.strip().splitlines()[-1])
        except (json.JSONDecodeError, IndexError):
            data = {"error": f"search failed (exit {result.exit_code}): {result.stderr[-1000:]}"}
        seconds = round(time.monotonic() - started, 4)
        if "error" in data:
            self.tracer.emit(EnvAction(env="search", action="search_corpus", args=args, outcome="error",
                                       seconds=seconds, error=data["error"]))
            return f"Error: {data['error']}"
        hits = data["results"]
        self.tracer.emit(EnvAction(env="search", action="search_corpus", args=args, outcome="ok", seconds=seconds,
                                   results=[{k: h.get(k) for k in ("title", "url", "score")} for h in hits]))
        return format_hits(query, hits)
