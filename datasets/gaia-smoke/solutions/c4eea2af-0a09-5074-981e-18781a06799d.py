# Reference solution: hot dry days in July/August 2022 (csv).
import pandas as pd

df = pd.read_csv("station_daily_2022.csv", parse_dates=["date"])
print(df.describe())
summer = df[df["date"].dt.month.isin([7, 8])]
hot_dry = summer[(summer["tmax_c"] >= 30) & (summer["precip_mm"] == 0)]
print(hot_dry)
print(len(hot_dry))
