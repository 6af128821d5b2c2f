"""Write datasets/multihoprag-sample/: corpus.json, MultiHopRAG.json (the official layouts) and replay.jsonl.

Every article, outlet, person and company is invented for this project. Each replayed agent
searches the corpus inside the sandbox (search_corpus) and answers; some answers are wrong,
some right in another form, some searches miss an evidence article, so that the scorers and
the retrieval recall are exercised. The expected verdicts and recalls are in
tests/test_multihoprag.py.

    python scripts/make_multihoprag_sample.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "datasets" / "multihoprag-sample"

TECH, HARBOR, SPORTS, CIVIC = "TechPulse Daily", "The Harbor Ledger", "Northern Sports Wire", "The Civic Times"
SITES = {TECH: "techpulse.example", HARBOR: "harborledger.example", SPORTS: "northsportswire.example",
         CIVIC: "civictimes.example"}

# key: (title, source, author, category, published_at, body)
ARTICLES: dict[str, tuple[str, str, str, str, str, str]] = {
    "orion": ("Lumina Labs unveils the Orion-7 AI chip", TECH, "Rosa Imrie", "technology", "2023-09-12T09:00:00+00:00",
              "Lumina Labs chief executive Dana Whitfield unveiled the Orion-7 chip on Tuesday at the company's "
              "developer conference in Halden. Whitfield said the processor was designed for training large "
              "language models and would ship to cloud customers in the first quarter of next year. The Orion-7 "
              "packs 96 gigabytes of memory and, according to Lumina Labs, uses a third less power than its "
              "predecessor. Analysts called the launch the most important in the company's eleven-year history."),
    "probe": ("Regulators open antitrust probe into Lumina Labs", HARBOR, "Tomas Ferrant", "business",
              "2023-10-03T14:30:00+00:00",
              "European competition regulators have opened a formal antitrust investigation into Lumina Labs, "
              "the chip designer run by Dana Whitfield. The probe will examine whether the company tied sales of "
              "its processors to long-term software contracts. Lumina Labs said it would cooperate fully. The "
              "investigation comes weeks after the launch of the company's Orion-7 chip, which several cloud "
              "providers had complained was only available in bundles."),
    "benchmarks": ("Orion-7 benchmark results fall short", TECH, "Rosa Imrie", "technology",
                   "2023-10-18T08:15:00+00:00",
                   "Independent benchmark results published on Wednesday show the Orion-7 chip trailing rival "
                   "accelerators on inference workloads by as much as 18 percent. Lumina Labs disputed the "
                   "methodology and said a firmware update due in December would close most of the gap."),
    "cup": ("Riverton Rovers win the Coastal Cup", SPORTS, "Gil Marsh", "sports", "2023-11-05T20:45:00+00:00",
            "Riverton Rovers won the Coastal Cup on Sunday, beating Port Aster 3-1 in front of a sold-out "
            "crowd. Striker Mateo Alvarez scored twice in the final, his first a header from a corner and his "
            "second a low shot in stoppage time. It was the Rovers' first trophy in nine seasons."),
    "signing": ("Mateo Alvarez signs with Kestrel FC", CIVIC, "Lena Ortiz", "sports", "2023-11-20T11:00:00+00:00",
                "Kestrel FC have signed striker Mateo Alvarez from Riverton Rovers on a four-year contract, the "
                "club announced on Monday. Alvarez, who scored twice in this month's Coastal Cup final, is the "
                "most expensive signing in Kestrel's history. Coach Helena Brandt called him the missing piece."),
    "coach": ("Kestrel FC dismiss coach Helena Brandt", SPORTS, "Gil Marsh", "sports", "2023-12-10T18:20:00+00:00",
              "Kestrel FC dismissed head coach Helena Brandt on Sunday after a run of five straight league "
              "defeats. Brandt had been in charge for two seasons. Assistant coach Omar Lindqvist will lead the "
              "team on an interim basis."),
    "captain": ("Riverton Rovers name a new captain", SPORTS, "Gil Marsh", "sports", "2023-12-03T10:00:00+00:00",
                "Defender Ilse Moreau will captain Riverton Rovers for the rest of the season, the club said. "
                "Moreau has been at the Rovers for six years and replaces the departed vice-captain."),
    "raise": ("Quillstream raises $40 million", TECH, "Noor Haddad", "technology", "2023-08-14T07:30:00+00:00",
              "Quillstream, the note-taking startup founded by Priya Natarajan, has raised $40 million in a "
              "funding round led by Harbourline Ventures. Natarajan said the money would pay for an office in "
              "Lisbon and a team of forty engineers."),
    "resign": ("Quillstream founder steps down as chief executive", HARBOR, "Tomas Ferrant", "business",
               "2023-12-01T16:00:00+00:00",
               "Priya Natarajan has stepped down as chief executive of Quillstream, four months after the "
               "startup raised $40 million. She will remain on the board. Chief operating officer Ben Okafor "
               "takes over as interim chief executive."),
    "tram": ("Marlow approves a new tram line", CIVIC, "Lena Ortiz", "politics", "2023-07-22T12:00:00+00:00",
             "The city council of Marlow approved a twelve-kilometre tram line connecting the harbour with the "
             "university district. The project is expected to cost 220 million euros and to open in 2027."),
    "tram_delay": ("Marlow tram project delayed by budget dispute", HARBOR, "Tomas Ferrant", "politics",
                   "2023-09-30T09:45:00+00:00",
                   "Construction of Marlow's harbour tram line has been postponed after the council and the "
                   "regional government failed to agree on funding. The latest estimate puts the cost of the "
                   "tram project at 310 million euros, and the opening has slipped to 2029."),
    "mayor": ("Jonah Reyes wins re-election as mayor of Marlow", CIVIC, "Lena Ortiz", "politics",
              "2023-10-11T23:10:00+00:00",
              "Mayor Jonah Reyes won a second term in Marlow with 54 percent of the vote. Reyes promised to "
              "rescue the delayed tram line and to build two thousand affordable homes."),
    "open": ("Ana Kovac wins the Lakeside Open", SPORTS, "Priscilla Dunn", "sports", "2023-09-02T19:00:00+00:00",
             "Left-handed veteran Ana Kovac won the Lakeside Open on Saturday, beating the top seed in three "
             "sets. It was the 34-year-old's first title in three years."),
    "retire": ("Ana Kovac announces her retirement", CIVIC, "Lena Ortiz", "sports", "2023-09-25T15:00:00+00:00",
               "Ana Kovac, the left-handed tennis player who won the Lakeside Open this month, said she will "
               "retire at the end of the season. Kovac won eleven titles in a fifteen-year career."),
    "recall": ("Vireo Motors recalls 12,000 e-scooters", TECH, "Noor Haddad", "technology",
               "2023-11-29T06:50:00+00:00",
               "Vireo Motors is recalling 12,000 electric scooters after reports that the folding hinge can "
               "crack. Owners are asked to stop riding the Vireo S2 model until the hinge is replaced."),
    "shares": ("Vireo Motors shares slide after scooter recall", HARBOR, "Tomas Ferrant", "business",
               "2023-12-14T17:05:00+00:00",
               "Shares in Vireo Motors fell 11 percent this week, extending losses that began when the company "
               "recalled 12,000 of its S2 electric scooters. The company cut its sales forecast for next year."),
}

# (query, answer, question_type, evidence keys, replay searches [(query, top_k)], replayed answer)
QUERIES: list[tuple[str, str, str, list[str], list[tuple[str, int]], str]] = [
    ("Which company, whose chief executive unveiled the Orion-7 chip according to TechPulse Daily, is the "
     "subject of an antitrust probe reported by The Harbor Ledger?", "Lumina Labs", "inference_query",
     ["orion", "probe"], [("Orion-7 chip unveiled chief executive", 2), ("antitrust probe", 2)], "Lumina Labs"),
    ("Who is the striker who scored twice in the Coastal Cup final, as reported by Northern Sports Wire, and "
     "later signed with Kestrel FC according to The Civic Times?", "Mateo Alvarez", "inference_query",
     ["cup", "signing"], [("striker scored twice Coastal Cup final", 3)], "Mateo Alvarez"),
    ("Which founder, whose startup raised $40 million according to TechPulse Daily, stepped down as chief "
     "executive according to The Harbor Ledger?", "Priya Natarajan", "inference_query",
     ["raise", "resign"], [("funding round raised 40 million led by Harbourline Ventures", 1)], "Dana Whitfield"),
    ("Do both the TechPulse Daily article on the Orion-7 launch and The Harbor Ledger article on the antitrust "
     "probe name Dana Whitfield as the head of Lumina Labs?", "Yes", "comparison_query",
     ["orion", "probe"], [("Dana Whitfield Lumina Labs", 3)], "Yes"),
    ("Did The Civic Times report on the approval of the Marlow tram line and The Harbor Ledger report on its "
     "delay give the same cost for the project?", "No", "comparison_query",
     ["tram", "tram_delay"], [("Marlow tram line cost million euros", 2)], "Yes"),
    ("Do both the Northern Sports Wire report on the Lakeside Open and The Civic Times report on Ana Kovac's "
     "retirement describe her as left-handed?", "Yes", "comparison_query",
     ["open", "retire"], [("Ana Kovac left-handed", 2)], "yes."),
    ("Was the Orion-7 chip unveiled, as reported by TechPulse Daily, before The Harbor Ledger reported the "
     "antitrust probe into its maker?", "Yes", "temporal_query",
     ["orion", "probe"], [("Orion-7 unveiled", 1), ("antitrust investigation Lumina Labs", 1)], "Yes"),
    ("Did Vireo Motors' shares fall, as reported by The Harbor Ledger, before TechPulse Daily reported the "
     "recall of its e-scooters?", "No", "temporal_query",
     ["recall", "shares"], [("Vireo Motors recall scooters shares", 2)], "No"),
    ("Did Mateo Alvarez sign with Kestrel FC, as reported by The Civic Times, before Northern Sports Wire "
     "reported that Kestrel FC dismissed coach Helena Brandt?", "Yes", "temporal_query",
     ["signing", "coach"], [("Kestrel FC dismissed coach Helena Brandt defeats", 1)], "No"),
    ("What salary did Lumina Labs pay Dana Whitfield in 2023, according to The Harbor Ledger?",
     "Insufficient information.", "null_query", [], [("Dana Whitfield salary", 3)], "Insufficient information."),
    ("How many passengers per day will the Marlow tram line carry, according to TechPulse Daily?",
     "Insufficient information.", "null_query", [], [("Marlow tram passengers per day", 3)],
     "Not enough information."),
    ("Which club did the new Riverton Rovers captain play for before 2015, according to The Civic Times?",
     "Insufficient information.", "null_query", [], [("Riverton Rovers captain previous club", 3)],
     "Insufficient information."),
]


def article(key: str) -> dict:
    title, source, author, category, published, body = ARTICLES[key]
    url = f"https://{SITES[source]}/2023/{key.replace('_', '-')}"
    return {"title": title, "author": author, "source": source, "published_at": published, "category": category,
            "url": url, "body": body}


def main() -> None:
    sys.path.insert(0, str(REPO))
    from harness.benchmarks.multihoprag.dataset import query_id

    OUT.mkdir(parents=True, exist_ok=True)
    corpus = [article(key) for key in ARTICLES]
    queries, replay = [], []
    for query, answer, kind, evidence, searches, replayed in QUERIES:
        facts = [{**{k: v for k, v in article(key).items() if k != "body"},
                  "fact": article(key)["body"].split(". ")[0] + "."} for key in evidence]
        queries.append({"query": query, "answer": answer, "question_type": kind, "evidence_list": facts})
        turns = [{"tool_calls": [{"name": "search_corpus", "arguments": {"query": q, "top_k": k}}],
                  "usage": {"prompt_tokens": 420, "completion_tokens": 25}} for q, k in searches]
        turns.append({"content": f"Based on the articles I found: <solution>{replayed}</solution>",
                      "usage": {"prompt_tokens": 900, "completion_tokens": 30}})
        replay.append({"instance_id": query_id(query), "turns": turns})
    (OUT / "corpus.json").write_text(json.dumps(corpus, indent=2) + "\n")
    (OUT / "MultiHopRAG.json").write_text(json.dumps(queries, indent=2) + "\n")
    (OUT / "replay.jsonl").write_text("".join(json.dumps(r) + "\n" for r in replay))
    print(f"wrote {len(corpus)} articles and {len(queries)} queries to {OUT}")


if __name__ == "__main__":
    main()
