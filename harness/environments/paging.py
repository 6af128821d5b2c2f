"""Paging and finding in long text: one implementation for files and web pages."""

from __future__ import annotations

MAX_HITS = 20
CONTEXT = 80  # characters shown on each side of a hit


def page_count(text: str, page_size: int) -> int:
    return max(1, -(-len(text) // page_size))


def clamp_page(text: str, page_size: int, page: int) -> int:
    return min(max(1, page), page_count(text, page_size))


def page_of(text: str, page_size: int, page: int) -> str:
    """Page `page` (1-based, clamped) of text."""
    page = clamp_page(text, page_size, page)
    return text[(page - 1) * page_size : page * page_size]


def find_hits(text: str, query: str, page_size: int) -> list[str]:
    """Case-insensitive hits of query, each as 'page N: ...context...' (at most MAX_HITS)."""
    if not query:
        return []
    hits: list[str] = []
    low, q = text.lower(), query.lower()
    start = low.find(q)
    while start != -1 and len(hits) < MAX_HITS:
        snippet = text[max(0, start - CONTEXT) : start + len(query) + CONTEXT]
        hits.append(f"page {start // page_size + 1}: ...{snippet}...")
        start = low.find(q, start + 1)
    return hits
