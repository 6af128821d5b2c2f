# Reference solution: travel claims (EUR) of the top claimant (zip with csv + txt rates).
import io
import re
import zipfile

import pandas as pd

with zipfile.ZipFile("expense_claims_may_2023.zip") as zf:
    names = zf.namelist()
    print(names)
    note = zf.read(next(n for n in names if n.endswith(".txt"))).decode("utf-8")
    claims = pd.read_csv(io.BytesIO(zf.read(next(n for n in names if n.endswith(".csv")))))
print(note)
rates = {cur: float(r) for cur, r in re.findall(r"1 ([A-Z]{3}) = ([\d.]+) EUR", note)}
rates["EUR"] = 1.0
print(rates)
claims["amount_eur"] = claims["amount"] * claims["currency"].map(rates)
assert claims["amount_eur"].notna().all()
totals = claims.groupby("employee")["amount_eur"].sum().sort_values(ascending=False)
print(totals)
top = totals.index[0]
travel = claims[(claims["employee"] == top) & (claims["category"] == "Travel")]["amount_eur"].sum()
print(top, travel)
print(f"{travel:.2f}")
