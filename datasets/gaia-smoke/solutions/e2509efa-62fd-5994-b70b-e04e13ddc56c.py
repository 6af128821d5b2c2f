# Reference solution: top West-region sales rep in February 2023 (xlsx).
import pandas as pd

df = pd.read_excel("office_supplies_sales_q1_2023.xlsx", sheet_name="Sales")
print(df.head())
df["Date"] = pd.to_datetime(df["Date"])
df["Revenue"] = df["Units"] * df["Unit Price (EUR)"]
feb_west = df[(df["Date"].dt.year == 2023) & (df["Date"].dt.month == 2) & (df["Region"] == "West")]
totals = feb_west.groupby("Sales Rep")["Revenue"].sum().sort_values(ascending=False)
print(totals)
print(totals.index[0])
