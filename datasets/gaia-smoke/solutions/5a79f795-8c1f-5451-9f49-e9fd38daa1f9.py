# Reference solution: CEO direct report whose reporting tree costs the most (json).
import json
from collections import defaultdict

with open("hr_org_export.json", encoding="utf-8") as fh:
    emps = json.load(fh)["employees"]
by_id = {e["id"]: e for e in emps}
children = defaultdict(list)
for e in emps:
    children[e["manager_id"]].append(e["id"])
ceo = next(e for e in emps if e["manager_id"] is None)


def subtree_salary(eid):
    return by_id[eid]["annual_salary_eur"] + sum(subtree_salary(c) for c in children[eid])


totals = {by_id[c]["name"]: subtree_salary(c) for c in children[ceo["id"]]}
for name, total in sorted(totals.items(), key=lambda kv: -kv[1]):
    print(name, total)
print(max(totals, key=totals.get))
