# Reference solution: value of orders shipped after the promised date (xlsx, two sheets).
import pandas as pd

sheets = pd.read_excel("orders_2023_h1.xlsx", sheet_name=None)
print(list(sheets))
orders, products = sheets["Orders"], sheets["Products"]
df = orders.merge(products, on="Product Code", how="left")
df["Promised Date"] = pd.to_datetime(df["Promised Date"])
df["Shipped Date"] = pd.to_datetime(df["Shipped Date"])
late = df[df["Shipped Date"].notna() & (df["Shipped Date"] > df["Promised Date"])]
value = (late["Quantity"] * late["Unit Price (EUR)"]).sum()
print(len(late), value)
print(f"{value:.2f}")
