# Reference solution: department with highest average overtime per employee (csv).
import pandas as pd

df = pd.read_csv("timesheets_export.csv")
df["overtime"] = (df["hours_worked"] - 40).clip(lower=0)
per_dept = df.groupby("department").agg(total_ot=("overtime", "sum"),
                                        employees=("employee_id", "nunique"))
per_dept["avg_ot"] = per_dept["total_ot"] / per_dept["employees"]
per_dept = per_dept.sort_values("avg_ot", ascending=False)
print(per_dept)
print(per_dept.index[0])
