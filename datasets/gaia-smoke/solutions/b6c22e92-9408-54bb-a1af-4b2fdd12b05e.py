# Reference solution: average CSAT of regions at or above target (pptx).
import re

from pptx import Presentation

prs = Presentation("regional_review_h1_2023.pptx")
scores = []
for slide in prs.slides:
    text = "\n".join(sh.text_frame.text for sh in slide.shapes if sh.has_text_frame)
    if "Region:" not in text:
        continue
    region = re.search(r"Region:\s*(.+)", text).group(1).strip()
    sales = float(re.search(r"Net sales H1: EUR ([\d.]+)m", text).group(1))
    target = float(re.search(r"Sales target H1: EUR ([\d.]+)m", text).group(1))
    csat = float(re.search(r"CSAT[^:]*:\s*([\d.]+)", text).group(1))
    print(region, sales, target, csat)
    if sales >= target:
        scores.append(csat)
print(scores)
print(f"{sum(scores) / len(scores):.2f}")
