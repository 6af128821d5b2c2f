"""MultiHop-RAG's answer conventions: the prompt's {conventions} for a query over the news corpus."""

RULES = """\
Answer format (MultiHop-RAG conventions):
- Search the news corpus with search_corpus; the answer is in the articles, usually across two or more.
- Put your final answer inside <solution></solution>, as short as possible: Yes or No, a name, a date.
- If the articles do not say, answer <solution>Insufficient information.</solution>"""
