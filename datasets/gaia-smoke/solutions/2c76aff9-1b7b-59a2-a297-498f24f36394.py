# Reference solution: customers active in all three months with > 600 spent (zip of csv).
import zipfile

import pandas as pd

frames = []
with zipfile.ZipFile("card_transactions_q3_2023.zip") as zf:
    for name in zf.namelist():
        print(name)
        if name.endswith(".csv"):
            with zf.open(name) as fh:
                part = pd.read_csv(fh)
                part["source"] = name
                frames.append(part)
df = pd.concat(frames, ignore_index=True)
df = df[df["status"] != "refunded"]
df["month"] = pd.to_datetime(df["date"]).dt.month
per = df.groupby("customer").agg(months=("month", "nunique"), total=("amount_eur", "sum"))
print(per.sort_values("total", ascending=False))
picked = per[(per["months"] == 3) & (per["total"] > 600)].index
print(", ".join(sorted(picked)))
