# Reference solution: critical path length of the renovation plan (xlsx).
from functools import lru_cache

import pandas as pd

df = pd.read_excel("kitchen_renovation_plan.xlsx", sheet_name=0)
print(df)
duration = dict(zip(df["Task ID"], df["Duration (working days)"]))
deps = {}
for tid, dep in zip(df["Task ID"], df["Depends on"]):
    deps[tid] = [d.strip() for d in str(dep).split(",") if d.strip() and str(dep) != "nan"]


@lru_cache(maxsize=None)
def finish(tid):
    return max((finish(d) for d in deps[tid]), default=0) + int(duration[tid])


for tid in sorted(duration):
    print(tid, finish(tid))
print(max(finish(t) for t in duration))
