# Reference solution: earliest Saturday arrival at Sundby from Ellingport 07:40 (pdf timetable).
import re

from pypdf import PdfReader

text = "\n".join(page.extract_text() for page in PdfReader("western_isles_ferry_timetable.pdf").pages)
print(text[:600])
rows = re.findall(r"^(W\d+)\s+(\w+)\s+(\w+)\s+(\d\d):(\d\d)\s+(\d\d):(\d\d)\s+(Daily|Mon-Fri)\s*$",
                  text, re.M)
print(len(rows), "sailings")
sailings = [(int(h1) * 60 + int(m1), int(h2) * 60 + int(m2), a, b, days, sid)
            for sid, a, b, h1, m1, h2, m2, days in rows]
sailings = [s for s in sailings if s[4] == "Daily"]  # Saturday: no Mon-Fri services
sailings.sort()

BUFFER = 15
start, dest, t0 = "Ellingport", "Sundby", 7 * 60 + 40
ready = {start: t0}          # earliest time one can board a departure at each port
came_from = {}
best = None
for dep, arr, a, b, days, sid in sailings:
    if a in ready and dep >= ready[a]:
        if b == dest and (best is None or arr < best[0]):
            best = (arr, sid)
        if arr + BUFFER < ready.get(b, 10 ** 9):
            ready[b] = arr + BUFFER
            came_from[b] = (sid, a, dep, arr)
print(came_from)
arr, sid = best
print("last leg", sid)
print(f"{arr // 60:02d}:{arr % 60:02d}")
