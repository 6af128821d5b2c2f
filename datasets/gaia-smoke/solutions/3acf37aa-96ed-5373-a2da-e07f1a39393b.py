# Reference solution: product line with the largest Q1->Q4 growth (pdf table).
import re

from pypdf import PdfReader

text = "\n".join(page.extract_text() for page in PdfReader("brightwater_annual_report_2023.pdf").pages)
print(text)
table = text[text.index("Table 1:"):]
rows = re.findall(r"^([A-Za-z][A-Za-z ]*?)\s+([\d,]+)\s+([\d,]+)\s+([\d,]+)\s+([\d,]+)\s*$", table, re.M)
growth = {}
for name, q1, q2, q3, q4 in rows:
    q1, q4 = int(q1.replace(",", "")), int(q4.replace(",", ""))
    growth[name] = (q4 - q1) / q1
for name, g in sorted(growth.items(), key=lambda kv: -kv[1]):
    print(f"{name}: {g:.2%}")
print(max(growth, key=growth.get))
