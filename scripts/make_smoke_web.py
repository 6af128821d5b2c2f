"""Add the browsing tasks of datasets/gaia-smoke (against its offline website) to metadata.jsonl.

Answers are computed from the site's own data (datasets/gaia-smoke/website/serve.py).
Idempotent: re-running replaces these tasks. Usage: python3 scripts/make_smoke_web.py
"""

import collections
import importlib.util
import json
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "datasets" / "gaia-smoke"
META = ROOT / "2023" / "validation" / "metadata.jsonl"
SITE = "http://shop.gaia.test/"


def site():
    spec = importlib.util.spec_from_file_location("serve", ROOT / "website" / "serve.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def task_id(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"harness-gaia-smoke-web/{name}"))


TOOLS = {task_id("recall-batch-search"): "web search\nweb browser"}  # the others: "web browser\npython"


def tasks() -> list[dict]:
    m = site()
    irrigation = max((p for p in m.PRODUCTS if p["category"] == "Irrigation"), key=lambda p: p["price"])
    q3 = collections.Counter()
    for d in m.DELIVERIES:
        if "2023-07" <= d["date"][:7] <= "2023-09":
            q3[d["supplier"]] += d["quantity"]
    hoses = sorted((p for p in m.PRODUCTS if "hose" in p["name"].lower()), key=lambda p: p["price"])
    rows = [
        (task_id("irrigation-max-price"), 1,
         f"The online catalog of Northwind Garden Supply ({SITE}) lists its products over several pages. "
         "What is the price in EUR of the most expensive product in the Irrigation category? Give the number only.",
         f"{irrigation['price']:.2f}", ["Open the catalog", "Read all pages", "Take the highest Irrigation price"]),
        (task_id("q3-top-supplier"), 2,
         f"The Reports page of {SITE} offers a CSV file of the deliveries the shop received from its suppliers "
         "in 2023. Which supplier delivered the largest total quantity in the third quarter (July to September) "
         "of 2023?",
         q3.most_common(1)[0][0], ["Open Reports", "Download the CSV", "Sum quantity per supplier for Q3"]),
        (task_id("cheaper-hose-warranty"), 2,
         f"Use the search form on {SITE} to find the products with 'hose' in their name. How many years of "
         "warranty does the cheaper of them come with? Give the number only.",
         str(hoses[0]["warranty"]), ["Search for hose", "Open the cheaper product", "Read its warranty"]),
        (task_id("recall-batch-search"), 1,
         f"Northwind Garden Supply ({SITE}) has published a safety notice recalling one production batch of a "
         "product. What is the code of the recalled batch?",
         m.NOTICE["batch"], ["Search the site for the safety notice (no page links to it)", "Open the notice",
                             "Read the batch code"]),
    ]
    return [{"task_id": tid, "Question": q, "Level": level, "Final answer": answer, "file_name": "",
             "Annotator Metadata": {"Steps": "\n".join(steps), "Number of steps": str(len(steps)),
                                    "Tools": TOOLS.get(tid, "web browser\npython")}}
            for tid, level, q, answer, steps in rows]


def main() -> None:
    new = tasks()
    ids = {t["task_id"] for t in new}
    kept = [line for line in META.read_text().splitlines() if json.loads(line)["task_id"] not in ids]
    META.write_text("\n".join(kept + [json.dumps(t) for t in new]) + "\n")
    for t in new:
        print(t["task_id"], t["Level"], t["Final answer"])


if __name__ == "__main__":
    main()
