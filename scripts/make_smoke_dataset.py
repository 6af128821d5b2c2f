#!/usr/bin/env python3
"""Generate the synthetic GAIA-style smoke dataset in ``datasets/gaia-smoke/``.

Generation-only requirements (NOT dependencies of the harness itself; install
them in a throwaway venv):

    python3 -m venv /tmp/smoke-venv
    /tmp/smoke-venv/bin/pip install openpyxl python-docx python-pptx fpdf2

Usage:

    /tmp/smoke-venv/bin/python scripts/make_smoke_dataset.py            # (re)generate
    /tmp/smoke-venv/bin/python scripts/make_smoke_dataset.py --out DIR  # elsewhere
    python3 scripts/make_smoke_dataset.py --verify /tmp/sol-venv/bin/python
        # run every reference solution (datasets/gaia-smoke/solutions/<task_id>.py)
        # with the given interpreter in a temp dir holding only its attachment
        # and compare the last stdout line with "Final answer"
        # (--verify needs only the stdlib in the interpreter running this script).

All data is synthetic and was written for this project. Every task draws its
data from its own seeded ``random.Random``; rerunning the script reproduces
identical answers and identical files (timestamps embedded in xlsx/docx/pptx/
pdf/zip files are pinned to FIXED_TIME). The ground-truth answers are computed
here from the generated data; the reference solutions recompute them
independently from the attachment files.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import io
import json
import math
import random
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "datasets" / "gaia-smoke"
SPLIT_DIR = Path("2023") / "validation"
FIXED_TIME = dt.datetime(2023, 10, 2, 9, 0, 0)
ZIP_TIME = (2023, 10, 2, 9, 0, 0)
ID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "harness/datasets/gaia-smoke")


def task_id(slug: str) -> str:
    return str(uuid.uuid5(ID_NAMESPACE, slug))


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def fmt2(x: float) -> str:
    """Round to 2 decimals, refusing values too close to a rounding boundary
    (so float vs. exact arithmetic in a solution cannot change the answer)."""
    frac = (abs(x) * 100) % 1
    assert abs(frac - 0.5) > 1e-6, f"{x} is too close to a rounding boundary"
    return f"{x:.2f}"


def write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


def csv_bytes(header: list[str], rows: list[list]) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue().encode("utf-8")


def write_zip(path: Path, members: list[tuple[str, bytes]]) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)


def normalize_ooxml(path: Path) -> None:
    """Pin the timestamps inside an OOXML package (xlsx/docx/pptx): the zip
    entry dates and dcterms:created/modified in docProps/core.xml."""
    stamp = FIXED_TIME.strftime("%Y-%m-%dT%H:%M:%SZ")
    with zipfile.ZipFile(path) as zf:
        entries = [(i, zf.read(i.filename)) for i in zf.infolist()]
    with zipfile.ZipFile(path, "w") as zf:
        for info, data in entries:
            if info.filename == "docProps/core.xml":
                text = data.decode("utf-8")
                for tag in ("created", "modified"):
                    text = re.sub(
                        rf"(<dcterms:{tag}[^>]*>)[^<]*(</dcterms:{tag}>)",
                        rf"\g<1>{stamp}\g<2>",
                        text,
                    )
                data = text.encode("utf-8")
            new = zipfile.ZipInfo(info.filename, date_time=ZIP_TIME)
            new.compress_type = zipfile.ZIP_DEFLATED
            new.external_attr = 0o644 << 16
            zf.writestr(new, data)


def new_pdf():
    from fpdf import FPDF

    pdf = FPDF(format="A4")
    pdf.set_creation_date(FIXED_TIME.replace(tzinfo=dt.UTC))
    pdf.set_creator("harness make_smoke_dataset.py")
    pdf.set_producer("fpdf2")
    pdf.set_auto_page_break(True, margin=15)
    return pdf


def pdf_table(pdf, widths: list[float], header: list[str], rows: list[list[str]],
              aligns: list[str]) -> None:
    pdf.set_font("Helvetica", "B", 10)
    for w, h in zip(widths, header, strict=True):
        pdf.cell(w, 7, h, border=1, align="C")
    pdf.ln()
    pdf.set_font("Helvetica", "", 10)
    for row in rows:
        for w, cell, a in zip(widths, row, aligns, strict=True):
            pdf.cell(w, 7, cell, border=1, align=a)
        pdf.ln()


def attempts(slug: str, limit: int = 5000):
    """Yield seeded RNGs; a generator keeps the first one that satisfies its
    constraints (deterministic: same seeds, same order, every run)."""
    for n in range(limit):
        yield random.Random(f"gaia-smoke/{slug}/{n}")
    raise RuntimeError(f"no valid data found for {slug}")


FIRST = ["Amara", "Bence", "Chloe", "Dmitri", "Esther", "Farid", "Greta", "Hiro",
         "Ines", "Jonas", "Kavya", "Liam", "Mei", "Nadia", "Oscar", "Paula",
         "Quentin", "Rosa", "Samir", "Tove", "Ugo", "Vera", "Wanjiru", "Xavier",
         "Yusuf", "Zofia", "Anton", "Beatriz", "Cyrus", "Dalia", "Emil", "Freya",
         "Goran", "Helena", "Ivo", "Judit", "Kenji", "Lena", "Matteo", "Nora",
         "Omar", "Petra", "Rafael", "Sana", "Tobias", "Ulla", "Viktor", "Wen"]
LAST = ["Okafor", "Kovacs", "Durand", "Volkov", "Lindqvist", "Haddad", "Muller",
        "Tanaka", "Moreau", "Berg", "Iyer", "Walsh", "Chen", "Rahman", "Nilsen",
        "Costa", "Fabre", "Alvarez", "Khan", "Ek", "Bianchi", "Novak", "Mwangi",
        "Leclerc", "Demir", "Wojcik", "Petrov", "Santos", "Farahani", "Aziz",
        "Holm", "Sorensen", "Jovic", "Papadakis", "Horvat", "Szabo", "Mori",
        "Vogel", "Ricci", "Dahl", "Saleh", "Marek", "Ortega", "Malik", "Frey",
        "Koski", "Lund", "Zhou"]


def unique_names(rng: random.Random, n: int) -> list[str]:
    firsts = rng.sample(FIRST, n)
    lasts = rng.sample(LAST, n)
    return [f"{first} {last}" for first, last in zip(firsts, lasts, strict=True)]


# --------------------------------------------------------------------------
# Level 1
# --------------------------------------------------------------------------


def t_sales_xlsx(d: Path) -> dict:
    from openpyxl import Workbook
    from openpyxl.styles import Font

    slug = "l1-sales-xlsx"
    fname = "office_supplies_sales_q1_2023.xlsx"
    reps = ["Marta Jensen", "Oliver Brandt", "Priya Natarajan", "Lucas Ferreira",
            "Sofia Lindgren", "Tomasz Nowak", "Aisha Bello", "Daniel Okoye"]
    products = {"A4 Copy Paper (box)": (24.90, 40), "Ballpoint Pens (pack of 50)": (12.50, 30),
                "Heavy-Duty Stapler": (18.75, 12), "Desk Organizer": (19.99, 15),
                "Laser Toner Cartridge": (89.00, 8), "Filing Cabinet": (149.00, 3),
                "Whiteboard Markers (12)": (9.60, 25)}
    regions = ["North", "South", "East", "West"]
    for rng in attempts(slug):
        rows = []
        day = dt.date(2023, 1, 2)
        while day <= dt.date(2023, 3, 31):
            if day.weekday() < 5:
                for _ in range(rng.randint(1, 3)):
                    prod = rng.choice(list(products))
                    price, maxu = products[prod]
                    if rng.random() < 0.2:
                        price = round(price * 0.9, 2)
                    rows.append([day, rng.choice(reps), rng.choice(regions), prod,
                                 rng.randint(1, maxu), price])
            day += dt.timedelta(days=1)
        rev: dict[str, float] = {}
        for r in rows:
            if r[0].month == 2 and r[2] == "West":
                rev[r[1]] = rev.get(r[1], 0) + r[4] * r[5]
        top = sorted(rev.items(), key=lambda kv: -kv[1])
        # the winner must be clear and differ from the all-regions February winner
        feb_all: dict[str, float] = {}
        for r in rows:
            if r[0].month == 2:
                feb_all[r[1]] = feb_all.get(r[1], 0) + r[4] * r[5]
        if len(top) < 4 or top[0][1] < top[1][1] * 1.05:
            continue
        if max(feb_all, key=feb_all.get) == top[0][0]:
            continue
        break
    wb = Workbook()
    ws = wb.active
    ws.title = "Sales"
    ws.append(["Date", "Sales Rep", "Region", "Product", "Units", "Unit Price (EUR)"])
    for c in ws[1]:
        c.font = Font(bold=True)
    for r in rows:
        ws.append(r)
    for row in ws.iter_rows(min_row=2):
        row[0].number_format = "yyyy-mm-dd"
        row[5].number_format = "0.00"
    for col, w in zip("ABCDEF", (12, 18, 9, 28, 7, 16), strict=True):
        ws.column_dimensions[col].width = w
    wb.properties.creator = "Sales Operations"
    wb.properties.created = FIXED_TIME
    wb.save(d / fname)
    normalize_ooxml(d / fname)
    return dict(
        slug=slug, level=1, file_name=fname, answer=top[0][0],
        question=("The attached spreadsheet lists the first-quarter 2023 sales of a small "
                  "office-supply wholesaler. Which sales representative generated the highest "
                  "total revenue (units multiplied by unit price) in the West region in "
                  "February 2023? Give their full name as written in the spreadsheet."),
        steps=["Open the Sales sheet of the attached workbook.",
               "Keep the rows dated in February 2023 whose Region is West.",
               "Compute revenue per row as Units x Unit Price.",
               "Sum revenue per sales rep and pick the largest total."],
        tools=["Spreadsheet editor or Python (pandas)"],
    )


def t_weather_csv(d: Path) -> dict:
    slug = "l1-weather-csv"
    fname = "station_daily_2022.csv"
    for rng in attempts(slug):
        rows = []
        day = dt.date(2022, 1, 1)
        while day.year == 2022:
            doy = day.timetuple().tm_yday
            seasonal = math.sin(2 * math.pi * (doy - 110) / 365)
            tmax = round(17 + 13 * seasonal + rng.gauss(0, 3.2), 1)
            tmin = round(tmax - rng.uniform(6, 13), 1)
            wet = rng.random() < (0.22 if 150 < doy < 250 else 0.38)
            precip = round(rng.expovariate(1 / 6) + 0.1, 1) if wet else 0.0
            wind = rng.randint(3, 48)
            rows.append([day.isoformat(), tmax, tmin, precip, wind])
            day += dt.timedelta(days=1)
        summer = [r for r in rows if r[0][5:7] in ("07", "08")]
        dry = [r for r in summer if r[3] == 0.0]
        if len(dry) < 5:
            continue
        # force one dry day at exactly 30.0 (tests "at least") and a few gaps
        r30 = rng.choice(dry)
        r30[1] = 30.0
        r30[2] = min(r30[2], 21.4)
        for r in rng.sample(summer, 3):
            if r is not r30:
                r[1] = ""
        ans = sum(1 for r in summer if r[1] != "" and r[1] >= 30.0 and r[3] == 0.0)
        if not 8 <= ans <= 30:
            continue
        break
    write_csv(d / fname, ["date", "tmax_c", "tmin_c", "precip_mm", "wind_kmh"], rows)
    return dict(
        slug=slug, level=1, file_name=fname, answer=str(ans),
        question=("The attached CSV contains daily readings from a weather station for 2022 "
                  "(maximum and minimum temperature in degrees Celsius, precipitation in mm, "
                  "wind speed). On how many days in July and August 2022 did the maximum "
                  "temperature reach at least 30 degrees Celsius with no precipitation at all? "
                  "Days with a missing maximum temperature do not count."),
        steps=["Load the CSV.", "Keep rows dated in July or August 2022.",
               "Keep rows with tmax_c >= 30 and precip_mm == 0 (skipping missing tmax).",
               "Count the remaining rows."],
        tools=["Python (pandas) or a spreadsheet"],
    )


def t_access_log_txt(d: Path) -> dict:
    slug = "l1-access-log-txt"
    fname = "web_access.log"
    paths = ["/", "/login", "/api/orders", "/api/orders/1042", "/api/stock", "/static/app.js",
             "/static/style.css", "/reports/monthly", "/api/invoices", "/health", "/search?q=bolts"]
    uas = ["Mozilla/5.0 (Windows NT 10.0; Win64; x64)", "Mozilla/5.0 (X11; Linux x86_64)",
           "curl/7.88.1", "python-requests/2.31.0", "Mozilla/5.0 (Macintosh; Intel Mac OS X 13_4)"]
    for rng in attempts(slug):
        ips = ([f"192.0.2.{rng.randint(2, 254)}" for _ in range(12)]
               + [f"198.51.100.{rng.randint(2, 254)}" for _ in range(12)]
               + [f"203.0.113.{rng.randint(2, 254)}" for _ in range(12)])
        ips = sorted(set(ips))
        events = []
        for day in (13, 14, 15):
            for _ in range(rng.randint(130, 170)):
                t = dt.datetime(2023, 3, day) + dt.timedelta(seconds=rng.randint(0, 86399))
                p = rng.random()
                status = (200 if p < 0.70 else 304 if p < 0.78 else 404 if p < 0.87
                          else 500 if p < 0.92 else 502 if p < 0.95 else 503)
                if status == 304:
                    size = "-"
                elif status == 200:
                    size = str(rng.choice([500, 502, 503])) if rng.random() < 0.06 else str(rng.randint(180, 24000))
                else:
                    size = str(rng.randint(120, 900))
                method = "POST" if rng.random() < 0.15 else "GET"
                events.append((t, rng.choice(ips), method, rng.choice(paths), status, size,
                               rng.choice(uas)))
        events.sort()
        lines = [f'{ip} - - [{t:%d/%b/%Y:%H:%M:%S} +0000] "{m} {p} HTTP/1.1" {s} {b} "-" "{ua}"'
                 for t, ip, m, p, s, b, ua in events]
        day14 = [e for e in events if e[0].day == 14]
        ans = len({e[1] for e in day14 if 500 <= e[4] <= 599})
        naive = len({line.split()[0] for line in lines if "14/Mar/2023" in line and re.search(r" 5\d\d ", line)})
        if not 6 <= ans <= 20 or naive == ans:
            continue
        break
    (d / fname).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return dict(
        slug=slug, level=1, file_name=fname, answer=str(ans),
        question=("The attached file is a web server access log in combined log format covering "
                  "13-15 March 2023 (times in UTC). How many distinct client IP addresses received "
                  "at least one HTTP 5xx (server error) response on 14 March 2023?"),
        steps=["Parse each log line: client IP, timestamp, status code (the field after the "
               "quoted request; the next field is the response size).",
               "Keep lines dated 14/Mar/2023 whose status code is between 500 and 599.",
               "Count the distinct client IP addresses."],
        tools=["Python (re) or grep/awk"],
    )


def t_inventory_json(d: Path) -> dict:
    slug = "l1-inventory-json"
    fname = "warehouse_inventory.json"
    catalogue = [
        ("FA-1021", "M6 hex bolt, zinc plated, box of 100", "Fasteners"),
        ("FA-1022", "M8 hex bolt, zinc plated, box of 100", "Fasteners"),
        ("FA-1107", "M6 nylon lock nut, box of 200", "Fasteners"),
        ("FA-1210", "Wood screw 4x40 mm, box of 500", "Fasteners"),
        ("FA-1215", "Wood screw 5x60 mm, box of 250", "Fasteners"),
        ("FA-1302", "Wall plug 8 mm, bag of 100", "Fasteners"),
        ("FA-1410", "Blind rivet 4.8 mm, box of 500", "Fasteners"),
        ("AD-2001", "Two-part epoxy, 50 ml", "Adhesives"),
        ("AD-2010", "Construction adhesive, 310 ml cartridge", "Adhesives"),
        ("AD-2033", "Thread locker medium strength, 10 ml", "Adhesives"),
        ("HT-3004", "Claw hammer 450 g", "Hand Tools"),
        ("HT-3011", "Combination spanner set, 12 pieces", "Hand Tools"),
        ("HT-3020", "Screwdriver set, 8 pieces", "Hand Tools"),
        ("HT-3045", "Tape measure 5 m", "Hand Tools"),
        ("EL-4002", "Cable tie 200 mm, bag of 100", "Electrical"),
        ("EL-4015", "Wago connector 3-way, box of 50", "Electrical"),
        ("EL-4030", "Insulation tape 19 mm, black", "Electrical"),
        ("PL-5001", "PTFE thread seal tape", "Plumbing"),
        ("PL-5012", "Compression fitting 15 mm", "Plumbing"),
        ("SF-6003", "Safety glasses, clear", "Safety"),
        ("SF-6010", "Nitrile gloves size L, box of 100", "Safety"),
        ("SF-6021", "Ear defenders SNR 30", "Safety"),
    ]
    for rng in attempts(slug):
        cost = {sku: round(rng.uniform(1.5, 45), 2) for sku, _, _ in catalogue}
        warehouses = []
        total = 0.0
        for code, city in (("RTM", "Rotterdam"), ("LYS", "Lyon"), ("POZ", "Poznan")):
            items = []
            for sku, desc, cat in rng.sample(catalogue, rng.randint(13, 18)):
                qty = 0 if rng.random() < 0.08 else rng.randint(5, 480)
                items.append({"sku": sku, "description": desc, "category": cat,
                              "qty_on_hand": qty, "qty_reserved": min(qty, rng.randint(0, 60)),
                              "unit_cost_eur": cost[sku], "reorder_level": rng.choice([20, 40, 50, 100])})
                if cat == "Fasteners":
                    total += qty * cost[sku]
            items.sort(key=lambda i: i["sku"])
            warehouses.append({"code": code, "city": city, "items": items})
        try:
            ans = fmt2(total)
        except AssertionError:
            continue
        break
    doc = {"generated_at": "2023-09-30T06:00:00Z", "currency": "EUR", "warehouses": warehouses}
    (d / fname).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return dict(
        slug=slug, level=1, file_name=fname, answer=ans,
        question=("The attached JSON file is an inventory export from three warehouses. What is "
                  "the total value in euros of the on-hand stock (quantity on hand multiplied by "
                  "unit cost) of all items in the Fasteners category, across all warehouses? "
                  "Give the answer rounded to two decimal places."),
        steps=["Load the JSON and iterate over every warehouse's items.",
               "Keep items whose category is Fasteners.",
               "Multiply qty_on_hand by unit_cost_eur and sum over all warehouses.",
               "Round to two decimal places."],
        tools=["Python (json)"],
    )


def t_prime_puzzle(d: Path) -> dict:
    slug = "l1-prime-digit-sum"

    def is_prime(n: int) -> bool:
        return n > 1 and all(n % k for k in range(2, int(n ** 0.5) + 1))

    ans = sum(p for p in range(2000, 2101)
              if is_prime(p) and is_prime(sum(int(c) for c in str(p))))
    return dict(
        slug=slug, level=1, file_name="", answer=str(ans),
        question=("What is the sum of all prime numbers p with 2000 <= p <= 2100 whose decimal "
                  "digits add up to a prime number?"),
        steps=["List the primes between 2000 and 2100.",
               "For each, add up its digits and test whether that digit sum is prime.",
               "Sum the primes that pass."],
        tools=["Python"],
    )


# --------------------------------------------------------------------------
# Level 2
# --------------------------------------------------------------------------


def t_report_pdf(d: Path) -> dict:
    slug = "l2-annual-report-pdf"
    fname = "brightwater_annual_report_2023.pdf"
    lines_ = ["Tents", "Sleeping Bags", "Backpacks", "Footwear", "Cooking Gear",
              "Navigation", "Climbing Equipment", "Rain Apparel"]
    for rng in attempts(slug):
        table = {}
        for name in lines_:
            base = rng.randint(180, 2400)
            q = [base]
            for _ in range(3):
                q.append(max(60, round(q[-1] * rng.uniform(0.88, 1.22))))
            table[name] = q
        growth = {n: (q[3] - q[0]) / q[0] for n, q in table.items()}
        absinc = {n: q[3] - q[0] for n, q in table.items()}
        g = sorted(growth.values(), reverse=True)
        best = max(growth, key=growth.get)
        if g[0] - g[1] < 0.03 or max(absinc, key=absinc.get) == best:
            continue
        totals = {n: sum(q) for n, q in table.items()}
        if max(totals, key=totals.get) == best:
            continue
        break
    largest = max(totals, key=totals.get)
    pdf = new_pdf()
    pdf.set_title("Brightwater Outdoor Co. - Annual Report 2023")
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 16)
    pdf.cell(0, 10, "Brightwater Outdoor Co.", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", "", 13)
    pdf.cell(0, 8, "Annual Report 2023 - Summary for Shareholders", new_x="LMARGIN", new_y="NEXT")
    pdf.ln(4)
    pdf.set_font("Helvetica", "", 11)
    total_year = sum(totals.values())
    pdf.multi_cell(0, 6, (
        "2023 was a year of steady recovery for Brightwater. Group revenue reached "
        f"{total_year:,} thousand EUR, supported by a strong summer season and the opening of two "
        "new regional distribution points. Gross margin improved slightly thanks to lower "
        "freight costs in the second half of the year.\n\n"
        f"{largest} remained our largest product line by annual revenue. Several smaller lines "
        "grew quickly from a low base, while demand for some winter products softened. The "
        "quarterly breakdown by product line is shown in Table 1 below."))
    pdf.ln(4)
    pdf.set_font("Helvetica", "B", 11)
    pdf.cell(0, 7, "Table 1: Revenue by product line, 2023 (thousand EUR)", new_x="LMARGIN", new_y="NEXT")
    rows = [[n] + [f"{v:,}" for v in q] for n, q in table.items()]
    pdf_table(pdf, [60, 28, 28, 28, 28], ["Product line", "Q1", "Q2", "Q3", "Q4"], rows,
              ["L", "R", "R", "R", "R"])
    pdf.ln(6)
    pdf.set_font("Helvetica", "", 11)
    pdf.multi_cell(0, 6, (
        "Outlook: for 2024 the board expects moderate growth, with investment focused on the "
        "online shop and on expanding the range of lightweight equipment. Figures in this summary "
        "are unaudited."))
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 13)
    pdf.cell(0, 8, "Operational highlights", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", "", 11)
    pdf.multi_cell(0, 6, (
        f"- Employees at year end: {rng.randint(210, 290)}\n"
        f"- Retail partners: {rng.randint(300, 420)}\n"
        f"- Online orders shipped: {rng.randint(40000, 90000):,}\n"
        f"- Average delivery time: {rng.uniform(1.8, 3.2):.1f} days\n"
        "- Share of recycled packaging: 78%"))
    pdf.output(str(d / fname))
    return dict(
        slug=slug, level=2, file_name=fname, answer=best,
        question=("According to the table in the attached annual report, which product line had "
                  "the largest percentage increase in revenue from the first quarter (Q1) to the "
                  "fourth quarter (Q4) of 2023? Give the product line name exactly as written in "
                  "the report."),
        steps=["Extract the text of the PDF and locate Table 1 (revenue by product line).",
               "Parse the Q1 and Q4 values of each product line (thousand separators).",
               "Compute (Q4 - Q1) / Q1 for each line.",
               "Return the product line with the largest value."],
        tools=["PDF viewer or Python (pypdf)", "Calculator"],
    )


def t_minutes_docx(d: Path) -> dict:
    from docx import Document

    slug = "l2-meeting-minutes-docx"
    fname = "project_falcon_minutes.docx"
    team = ["Amara Okafor", "Bence Kovacs", "Chloe Durand", "Dmitri Volkov",
            "Esther Lindqvist", "Farid Haddad", "Greta Muller", "Hiro Tanaka"]
    actions = ["Update the risk register", "Circulate revised budget", "Book venue for user workshop",
               "Draft supplier evaluation criteria", "Review test plan for release 2",
               "Collect requirements from the warehouse team", "Prepare steering committee slides",
               "Check licence costs for the reporting tool", "Send meeting invite to legal",
               "Finalise data migration checklist", "Ask IT security for a penetration test slot",
               "Write the onboarding guide for pilot users", "Confirm hardware delivery dates",
               "Reconcile timesheets for March", "Update the project plan in the portal",
               "Organise training for support staff"]
    dates = [dt.date(2023, 5, 3), dt.date(2023, 5, 10), dt.date(2023, 5, 17), dt.date(2023, 5, 24)]
    for rng in attempts(slug):
        acts = rng.sample(actions, len(actions))
        meetings = []
        missing = set()
        k = 0
        for date in dates:
            attendees = sorted(rng.sample(team, rng.randint(5, 7)))
            absent = [p for p in team if p not in attendees]
            items = []
            for _ in range(4):
                owner = rng.choice(team) if rng.random() < 0.2 else rng.choice(attendees)
                items.append((acts[k], owner, date + dt.timedelta(days=rng.choice([7, 14]))))
                k += 1
                if owner not in attendees:
                    missing.add(owner)
            meetings.append((date, attendees, absent, items))
        if not 2 <= len(missing) <= 3:
            continue
        # everyone who was absent at least once but is not in the answer makes a good distractor
        break
    doc = Document()
    doc.core_properties.author = "Project Office"
    doc.core_properties.title = "Project Falcon - steering meeting minutes"
    doc.core_properties.created = FIXED_TIME
    doc.core_properties.modified = FIXED_TIME
    doc.core_properties.last_modified_by = "Project Office"
    doc.core_properties.revision = 1
    doc.add_heading("Project Falcon - weekly project meetings, May 2023", level=0)
    doc.add_paragraph("Minutes of the weekly project meetings for the warehouse system "
                      "replacement. Action items are listed at the end of each meeting.")
    topics = ["Vendor selection: two shortlisted vendors presented; scoring to be completed "
              "before the next steering committee.",
              "Budget forecast: spend is on track; contingency reduced after the licence "
              "negotiation.",
              "Pilot site readiness: network cabling at the pilot warehouse is finished; "
              "scanners still outstanding.",
              "Data migration: second trial load completed with 97% of records accepted.",
              "Training plan: train-the-trainer sessions proposed for the week before go-live.",
              "Test environment: availability issues last week were caused by a certificate "
              "expiry and are resolved.",
              "Change requests: CR-014 (label format) approved, CR-015 (returns flow) deferred.",
              "Risks and issues: dependency on the carrier integration remains the top risk."]
    for i, (date, attendees, absent, items) in enumerate(meetings, 1):
        doc.add_heading(f"Meeting {i} - {date:%d %B %Y}", level=1)
        chair = attendees[0]
        att = [f"{p} (chair)" if p == chair else p for p in attendees]
        doc.add_paragraph("Attendees: " + ", ".join(att))
        doc.add_paragraph("Apologies: " + (", ".join(absent) if absent else "none"))
        doc.add_heading("Discussion", level=2)
        for topic in rng.sample(topics, 3):
            doc.add_paragraph(topic, style="List Bullet")
        doc.add_heading("Action items", level=2)
        table = doc.add_table(rows=1, cols=3)
        table.style = "Table Grid"
        hdr = table.rows[0].cells
        hdr[0].text, hdr[1].text, hdr[2].text = "Action", "Owner", "Due date"
        for act, owner, due in items:
            c = table.add_row().cells
            c[0].text, c[1].text, c[2].text = act, owner, due.isoformat()
    doc.save(d / fname)
    normalize_ooxml(d / fname)
    return dict(
        slug=slug, level=2, file_name=fname, answer=", ".join(sorted(missing)),
        question=("The attached document contains the minutes of four project meetings. Which "
                  "people were assigned an action item in a meeting that they did not attend? "
                  "Give their full names as a comma-separated list in alphabetical order."),
        steps=["Read the minutes of each meeting: the Attendees line and the action-item table.",
               "For every action item, check whether its owner is among that meeting's attendees.",
               "Collect the owners who were not present, remove duplicates, sort alphabetically."],
        tools=["Word processor or Python (python-docx)"],
    )


def t_regional_pptx(d: Path) -> dict:
    from pptx import Presentation
    from pptx.util import Inches, Pt

    slug = "l2-regional-review-pptx"
    fname = "regional_review_h1_2023.pptx"
    regions = ["Nordics", "DACH", "Benelux", "Iberia", "UK and Ireland", "Central Europe", "Italy"]
    for rng in attempts(slug):
        data = []
        for r in regions:
            target = round(rng.uniform(2.0, 9.0), 2)
            sales = round(target * rng.uniform(0.85, 1.15), 2)
            data.append([r, sales, target, round(rng.uniform(3.4, 4.8), 2), rng.randint(8, 60)])
        exact = rng.choice(data)
        exact[1] = exact[2]  # exactly on target: "met" counts
        met = [row for row in data if row[1] >= row[2]]
        if not 3 <= len(met) <= 5:
            continue
        avg = sum(row[3] for row in met) / len(met)
        try:
            ans = fmt2(avg)
        except AssertionError:
            continue
        if fmt2(sum(r[3] for r in data) / len(data)) == ans or ans.endswith("0"):
            continue
        break
    prs = Presentation()
    prs.core_properties.author = "Sales Excellence"
    prs.core_properties.title = "Regional business review H1 2023"
    prs.core_properties.created = FIXED_TIME
    prs.core_properties.modified = FIXED_TIME
    prs.core_properties.last_modified_by = "Sales Excellence"
    prs.core_properties.revision = 1
    s = prs.slides.add_slide(prs.slide_layouts[0])
    s.shapes.title.text = "Regional business review - H1 2023"
    s.placeholders[1].text = "Sales Excellence team, July 2023"
    s = prs.slides.add_slide(prs.slide_layouts[1])
    s.shapes.title.text = "Agenda"
    s.placeholders[1].text = "One slide per region\nNet sales versus target\nCustomer satisfaction\nNext steps"
    for name, sales, target, csat, hc in data:
        s = prs.slides.add_slide(prs.slide_layouts[1])
        s.shapes.title.text = f"Region: {name}"
        body = s.placeholders[1].text_frame
        body.text = f"Net sales H1: EUR {sales:.2f}m"
        for line in (f"Sales target H1: EUR {target:.2f}m",
                     f"Customer satisfaction (CSAT, 1-5): {csat:.2f}",
                     f"Sales headcount: {hc}",
                     "Key focus H2: " + rng.choice(["key account renewals", "new distributor onboarding",
                                                    "pricing discipline", "service contracts",
                                                    "public tenders"])):
            body.add_paragraph().text = line
    s = prs.slides.add_slide(prs.slide_layouts[5])
    s.shapes.title.text = "Next steps"
    tb = s.shapes.add_textbox(Inches(1), Inches(2), Inches(8), Inches(3)).text_frame
    tb.text = "Regional plans for H2 due by 15 August."
    tb.paragraphs[0].font.size = Pt(20)
    tb.add_paragraph().text = "CSAT survey methodology unchanged from 2022 (scale 1-5)."
    prs.save(d / fname)
    normalize_ooxml(d / fname)
    return dict(
        slug=slug, level=2, file_name=fname, answer=ans,
        question=("The attached slide deck has one slide per sales region. What is the average "
                  "customer satisfaction (CSAT) score of the regions whose H1 net sales met or "
                  "exceeded their H1 sales target? Give the answer rounded to two decimal places."),
        steps=["Extract the text of each region slide.",
               "Parse net sales, sales target and CSAT for each region.",
               "Keep regions where net sales >= target (one region is exactly on target).",
               "Average their CSAT scores and round to two decimals."],
        tools=["Presentation viewer or Python (python-pptx)", "Calculator"],
    )


def t_timesheets_csv(d: Path) -> dict:
    slug = "l2-timesheets-csv"
    fname = "timesheets_export.csv"
    depts = ["Engineering", "Finance", "Logistics", "Marketing", "Customer Support"]
    weeks = [dt.date(2023, 3, 6) + dt.timedelta(weeks=i) for i in range(8)]
    for rng in attempts(slug):
        names = unique_names(rng, 32)
        counts = [9, 4, 8, 5, 6]
        emps = []
        k = 0
        for dep, n in zip(depts, counts, strict=True):
            for _ in range(n):
                emps.append((f"E{1000 + k * 7}", names[k], dep, rng.uniform(0, 1)))
                k += 1
        rows = []
        for week in weeks:
            for eid, name, dep, ot in emps:
                if rng.random() < 0.08:
                    continue  # leave week, no row
                h = rng.choice([36, 37.5, 38, 39, 40, 40])
                if rng.random() < ot:
                    h = 40 + rng.choice([0.5, 1, 1.5, 2, 3, 4, 5, 6, 8])
                rows.append([eid, name, dep, week.isoformat(), h])
        rows.sort(key=lambda r: (r[3], r[0]))
        tot = {dep: 0.0 for dep in depts}
        cnt = {dep: set() for dep in depts}
        rowavg = {dep: [] for dep in depts}
        for eid, _name, dep, _week, h in rows:
            tot[dep] += max(0.0, h - 40)
            cnt[dep].add(eid)
            rowavg[dep].append(max(0.0, h - 40))
        per_emp = {dep: tot[dep] / len(cnt[dep]) for dep in depts}
        ranked = sorted(per_emp.values(), reverse=True)
        best = max(per_emp, key=per_emp.get)
        if ranked[0] - ranked[1] < 0.75:
            continue
        if max(tot, key=tot.get) == best:
            continue
        break
    write_csv(d / fname, ["employee_id", "employee_name", "department", "week_starting", "hours_worked"],
              [[r[0], r[1], r[2], r[3], f"{r[4]:g}"] for r in rows])
    return dict(
        slug=slug, level=2, file_name=fname, answer=best,
        question=("The attached CSV is a timesheet export with the hours each employee worked per "
                  "week. Overtime is any time worked beyond 40 hours in a week. Which department "
                  "had the highest average total overtime per employee over the whole period "
                  "covered by the export? Give the department name as written in the file."),
        steps=["Load the CSV and compute weekly overtime as max(0, hours_worked - 40).",
               "Sum overtime per department.",
               "Divide by the number of distinct employees in each department.",
               "Return the department with the highest average."],
        tools=["Python (pandas) or a spreadsheet"],
    )


def t_orders_xlsx(d: Path) -> dict:
    from openpyxl import Workbook
    from openpyxl.styles import Font

    slug = "l2-late-orders-xlsx"
    fname = "orders_2023_h1.xlsx"
    products = [("P-101", "Pallet jack 2.5 t"), ("P-104", "Shelf unit 180 cm"),
                ("P-110", "Stretch film roll"), ("P-118", "Label printer"),
                ("P-121", "Safety barrier 2 m"), ("P-130", "Plastic crate 60 l"),
                ("P-135", "Hand truck"), ("P-142", "Barcode scanner"),
                ("P-150", "Dock bumper"), ("P-163", "Packing table")]
    customers = ["Aldermoor Retail", "Baywater Foods", "Cobalt Pharma", "Dunmore Hardware",
                 "Eastfield Garden", "Fenwick Textiles", "Granite Logistics"]
    for rng in attempts(slug):
        price = {code: round(rng.uniform(4, 650), 2) for code, _ in products}
        orders = []
        total = 0.0
        late_n = 0
        for i in range(90):
            od = dt.date(2023, 1, 2) + dt.timedelta(days=rng.randint(0, 170))
            promised = od + dt.timedelta(days=rng.choice([5, 7, 10, 14]))
            code = rng.choice(products)[0]
            qty = rng.randint(1, 40)
            r = rng.random()
            if r < 0.08:
                shipped = None
            elif r < 0.33:
                shipped = promised + dt.timedelta(days=rng.randint(1, 9))
            elif r < 0.40:
                shipped = promised  # on the promised day = on time
            else:
                shipped = promised - dt.timedelta(days=rng.randint(1, 4))
            orders.append([f"SO-{23000 + i * 3}", rng.choice(customers), code, qty, od, promised, shipped])
            if shipped is not None and shipped > promised:
                total += qty * price[code]
                late_n += 1
        try:
            ans = fmt2(total)
        except AssertionError:
            continue
        break
    wb = Workbook()
    ws = wb.active
    ws.title = "Orders"
    ws.append(["Order ID", "Customer", "Product Code", "Quantity", "Order Date", "Promised Date",
               "Shipped Date"])
    for o in orders:
        ws.append(o)
    for row in ws.iter_rows(min_row=2):
        for c in row[4:7]:
            c.number_format = "yyyy-mm-dd"
    ws2 = wb.create_sheet("Products")
    ws2.append(["Product Code", "Description", "Unit Price (EUR)"])
    for code, desc in products:
        ws2.append([code, desc, price[code]])
    ws3 = wb.create_sheet("Notes")
    ws3.append(["Orders without a shipped date have not shipped yet."])
    ws3.append(["Prices are list prices excluding VAT."])
    for sh in (ws, ws2):
        for c in sh[1]:
            c.font = Font(bold=True)
    wb.properties.creator = "Order Desk"
    wb.properties.created = FIXED_TIME
    wb.save(d / fname)
    normalize_ooxml(d / fname)
    return dict(
        slug=slug, level=2, file_name=fname, answer=ans,
        question=("The attached workbook has an Orders sheet and a Products sheet. What is the "
                  "total value in euros of the orders that shipped later than their promised "
                  "date? An order's value is its quantity multiplied by the product's unit price "
                  "from the Products sheet; orders that have not shipped yet do not count. Give "
                  "the answer rounded to two decimal places."),
        steps=["Load both sheets of the workbook.",
               "Keep orders whose Shipped Date is present and later than the Promised Date.",
               "Look up each order's unit price by Product Code and multiply by Quantity.",
               "Sum and round to two decimal places."],
        tools=["Spreadsheet editor or Python (pandas)"],
    )


# --------------------------------------------------------------------------
# Level 3
# --------------------------------------------------------------------------


def t_monthly_zip(d: Path) -> dict:
    slug = "l3-monthly-transactions-zip"
    fname = "card_transactions_q3_2023.zip"
    for rng in attempts(slug):
        customers = unique_names(rng, 18)
        weights = [rng.uniform(0.2, 1.0) for _ in customers]
        months = {}
        n = 0
        for m, mname in ((7, "july"), (8, "august"), (9, "september")):
            rows = []
            for _ in range(rng.randint(45, 60)):
                c = rng.choices(customers, weights)[0]
                day = dt.date(2023, m, rng.randint(1, 30))
                amount = round(rng.lognormvariate(3.6, 0.7), 2)
                status = "refunded" if rng.random() < 0.1 else "completed"
                rows.append([f"TX{50000 + n * 13}", day.isoformat(), c, f"{amount:.2f}", status])
                n += 1
            rows.sort(key=lambda r: (r[1], r[0]))
            months[mname] = rows

        def answer(include_refunds: bool, customers=customers, months=months) -> list[str]:
            per = {c: [0.0, set()] for c in customers}
            for mname, rows in months.items():
                for _, _, c, amt, st in rows:
                    if st == "completed" or include_refunds:
                        per[c][0] += float(amt)
                        per[c][1].add(mname)
            return sorted(c for c, (tot, ms) in per.items() if len(ms) == 3 and tot > 600)

        ans = answer(False)
        per_tot = {}
        for rows in months.values():
            for _, _, c, amt, st in rows:
                if st == "completed":
                    per_tot[c] = per_tot.get(c, 0) + float(amt)
        if not 3 <= len(ans) <= 5 or answer(True) == ans:
            continue
        if any(abs(v - 600) < 5 for v in per_tot.values()):
            continue
        break
    members = [(f"transactions_{m}.csv",
                csv_bytes(["transaction_id", "date", "customer", "amount_eur", "status"], rows))
               for m, rows in months.items()]
    write_zip(d / fname, members)
    return dict(
        slug=slug, level=3, file_name=fname, answer=", ".join(ans),
        question=("The attached archive holds one CSV file of card transactions per month for "
                  "July, August and September 2023. Ignoring refunded transactions, which "
                  "customers made at least one purchase in each of the three months and spent "
                  "more than 600 euros in total over the three months? Give the customer names as "
                  "a comma-separated list in alphabetical order."),
        steps=["Extract the three CSV files from the archive and combine them.",
               "Drop transactions whose status is refunded.",
               "For each customer, record the months with a purchase and the total amount.",
               "Keep customers present in all three months with a total above 600.",
               "Sort their names alphabetically."],
        tools=["Archive extractor", "Python (pandas)"],
    )


def t_expenses_zip(d: Path) -> dict:
    slug = "l3-expenses-fx-zip"
    fname = "expense_claims_may_2023.zip"
    cats = ["Travel", "Accommodation", "Meals", "Software", "Training"]
    for rng in attempts(slug):
        rates = {"USD": round(rng.uniform(0.89, 0.95), 4), "GBP": round(rng.uniform(1.12, 1.18), 4),
                 "SEK": round(rng.uniform(0.083, 0.092), 4), "CHF": round(rng.uniform(1.01, 1.06), 4)}
        emps = unique_names(rng, 7)
        home = {e: rng.choice(["EUR", "EUR", "USD", "GBP", "SEK", "CHF"]) for e in emps}
        rows = []
        for i in range(70):
            e = rng.choice(emps)
            cur = home[e] if rng.random() < 0.7 else rng.choice(["EUR", "USD", "GBP", "SEK", "CHF"])
            cat = rng.choice(cats)
            base = {"Travel": 220, "Accommodation": 160, "Meals": 35, "Software": 60, "Training": 400}[cat]
            eur = rng.uniform(0.2, 2.0) * base
            amt = round(eur / rates.get(cur, 1.0), 2)
            rows.append([f"EXP-{7100 + i}", (dt.date(2023, 5, 1) + dt.timedelta(days=rng.randint(0, 30))).isoformat(),
                         e, cat, f"{amt:.2f}", cur])
        rows.sort(key=lambda r: (r[1], r[0]))

        def conv(r, rates=rates):
            return float(r[4]) * rates.get(r[5], 1.0)

        tot = {e: 0.0 for e in emps}
        raw = {e: 0.0 for e in emps}
        for r in rows:
            tot[r[2]] += conv(r)
            raw[r[2]] += float(r[4])
        ranked = sorted(tot.values(), reverse=True)
        top = max(tot, key=tot.get)
        if ranked[0] - ranked[1] < 50 or max(raw, key=raw.get) == top:
            continue
        travel = sum(conv(r) for r in rows if r[2] == top and r[3] == "Travel")
        if travel == 0:
            continue
        try:
            ans = fmt2(travel)
        except AssertionError:
            continue
        break
    note = ("Finance team note - expense claims May 2023\n"
            "============================================\n\n"
            "Claims are reimbursed in euros. Convert every claim that is not already in EUR with\n"
            "the monthly rates below (amount in foreign currency x rate = amount in EUR).\n"
            "Do not round individual conversions.\n\n"
            "Rates valid for May 2023:\n"
            + "".join(f"  1 {c} = {r:.4f} EUR\n" for c, r in rates.items())
            + "\nQuestions: finance-helpdesk (internal)\n")
    members = [("expenses_may_2023.csv",
                csv_bytes(["claim_id", "date", "employee", "category", "amount", "currency"], rows)),
               ("fx_rates_may_2023.txt", note.encode("utf-8"))]
    write_zip(d / fname, members)
    return dict(
        slug=slug, level=3, file_name=fname, answer=ans,
        question=("The attached archive contains an export of May 2023 expense claims and a "
                  "finance note with exchange rates. After converting every claim to euros with "
                  "the rates in the note, find the employee with the highest total claimed amount. "
                  "How many euros of that employee's claims are in the Travel category? Give the "
                  "answer rounded to two decimal places."),
        steps=["Extract the CSV and the text note from the archive.",
               "Parse the exchange rates from the note.",
               "Convert each claim to EUR (EUR claims unchanged).",
               "Sum converted amounts per employee and pick the highest.",
               "Sum that employee's converted Travel claims and round to two decimals."],
        tools=["Archive extractor", "Python (pandas, re)"],
    )


def t_ferry_pdf(d: Path) -> dict:
    slug = "l3-ferry-timetable-pdf"
    fname = "western_isles_ferry_timetable.pdf"
    ports = ["Ellingport", "Brannholm", "Kestrelsund", "Sundby", "Marrowick", "Tarnvik"]
    links = [("Ellingport", "Brannholm", 45), ("Ellingport", "Marrowick", 70),
             ("Brannholm", "Kestrelsund", 35), ("Brannholm", "Sundby", 95),
             ("Kestrelsund", "Sundby", 40), ("Marrowick", "Tarnvik", 30),
             ("Tarnvik", "Sundby", 50), ("Marrowick", "Kestrelsund", 55)]

    def hm(m: int) -> str:
        return f"{m // 60:02d}:{m % 60:02d}"

    def earliest(sailings, start, dest, t0, buffer, saturday):
        ready = {p: math.inf for p in ports}
        ready[start] = t0
        best = math.inf
        for _sid, a, b, dep, arr, days in sorted(sailings, key=lambda s: s[3]):
            if saturday and days == "Mon-Fri":
                continue
            if dep >= ready[a]:
                if b == dest:
                    best = min(best, arr)
                ready[b] = min(ready[b], arr + buffer)
        return best

    for rng in attempts(slug):
        sailings = []
        for a, b, dur in links:
            for frm, to in ((a, b), (b, a)):
                t = 6 * 60 + 5 * rng.randint(0, 12)
                while t < 19 * 60:
                    dur_ = dur + rng.choice([-5, 0, 0, 5])
                    days = "Mon-Fri" if rng.random() < 0.3 else "Daily"
                    sailings.append([None, frm, to, t, t + dur_, days])
                    t += rng.choice([60, 90, 120, 150, 180])
        sailings.sort(key=lambda s: (s[3], s[1], s[2]))
        for i, s in enumerate(sailings):
            s[0] = f"W{101 + i}"
        t0 = 7 * 60 + 40
        ans = earliest(sailings, "Ellingport", "Sundby", t0, 15, True)
        if ans == math.inf:
            continue
        if earliest(sailings, "Ellingport", "Sundby", t0, 15, False) == ans:
            continue
        if earliest(sailings, "Ellingport", "Sundby", t0, 0, True) == ans:
            continue
        # a connection must be required: no direct sailing anyway
        break
    pdf = new_pdf()
    pdf.set_title("Western Isles Ferries - Summer timetable 2023")
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 15)
    pdf.cell(0, 9, "Western Isles Ferries", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", "", 12)
    pdf.cell(0, 7, "Summer timetable, valid 1 June - 31 August 2023", new_x="LMARGIN", new_y="NEXT")
    pdf.ln(2)
    pdf.set_font("Helvetica", "", 10)
    pdf.multi_cell(0, 5, (
        "All times are local. Services marked Mon-Fri do not run on Saturdays, Sundays or public "
        "holidays; services marked Daily run every day. Passengers changing boats must allow at "
        "least 15 minutes between arrival and the next departure from the same port."))
    pdf.ln(3)
    rows = [[s[0], s[1], s[2], hm(s[3]), hm(s[4]), s[5]] for s in sailings]
    pdf_table(pdf, [20, 34, 34, 24, 24, 24],
              ["Service", "From", "To", "Departs", "Arrives", "Operates"], rows,
              ["C", "L", "L", "C", "C", "C"])
    pdf.ln(4)
    pdf.set_font("Helvetica", "B", 11)
    pdf.cell(0, 7, "Fares (single, EUR)", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", "", 10)
    pdf_table(pdf, [50, 30, 30], ["Ticket", "Adult", "Child"],
              [["Any single crossing", "12.50", "6.00"], ["Day pass", "34.00", "17.00"],
               ["Car (up to 5 m)", "41.00", "-"]], ["L", "R", "R"])
    pdf.output(str(d / fname))
    return dict(
        slug=slug, level=3, file_name=fname, answer=hm(ans),
        question=("Using the attached ferry timetable, a traveller is at the Ellingport ferry "
                  "terminal at 07:40 on Saturday 15 July 2023 and wants to reach Sundby as early "
                  "as possible. They may change boats any number of times, following the "
                  "timetable's rules. What is the earliest time they can arrive at Sundby? "
                  "Answer in 24-hour HH:MM format."),
        steps=["Extract the timetable rows (service, from, to, departure, arrival, operating days) "
               "and the rules from the PDF.",
               "Drop Mon-Fri services because the journey is on a Saturday.",
               "Run an earliest-arrival search from Ellingport at 07:40, requiring at least 15 "
               "minutes between arriving at a port and departing from it again.",
               "Report the earliest arrival time at Sundby."],
        tools=["PDF viewer or Python (pypdf)", "Python (graph search)"],
    )


def t_project_xlsx(d: Path) -> dict:
    from openpyxl import Workbook
    from openpyxl.styles import Font

    slug = "l3-critical-path-xlsx"
    fname = "kitchen_renovation_plan.xlsx"
    tasks = [("T01", "Site survey and measurements", []),
             ("T02", "Order kitchen units", ["T01"]),
             ("T03", "Strip out old kitchen", ["T01"]),
             ("T04", "Rough-in plumbing", ["T03"]),
             ("T05", "Rough-in electrical", ["T03"]),
             ("T06", "Building control inspection", ["T04", "T05"]),
             ("T07", "Plaster walls and ceiling", ["T06"]),
             ("T08", "Lay floor screed", ["T04"]),
             ("T09", "Floor tiling", ["T08", "T07"]),
             ("T10", "Paint walls and ceiling", ["T07"]),
             ("T11", "Install kitchen units", ["T02", "T09", "T10"]),
             ("T12", "Template and fit worktops", ["T11"]),
             ("T13", "Install appliances", ["T11"]),
             ("T14", "Final plumbing connections", ["T12", "T13"]),
             ("T15", "Final electrical connections and testing", ["T13"]),
             ("T16", "Clean up and handover", ["T14", "T15"])]
    for rng in attempts(slug):
        dur = {tid: rng.randint(1, 6) for tid, _, _ in tasks}
        dur["T02"] = rng.randint(15, 28)  # supplier lead time
        finish = {}
        for tid, _, deps in tasks:
            finish[tid] = max((finish[x] for x in deps), default=0) + dur[tid]
        ans = max(finish.values())
        # the supplier lead time must not trivially dominate, nor be irrelevant
        finish_wo = {}
        for tid, _, deps in tasks:
            finish_wo[tid] = max((finish_wo[x] for x in deps if x != "T02"), default=0) + dur[tid]
        if max(finish_wo.values()) == ans:
            continue
        break
    # shuffle presentation order (but keep IDs), as real plans are rarely sorted by dependency
    order = tasks[:]
    rng.shuffle(order)
    owners = ["Builder", "Plumber", "Electrician", "Kitchen supplier", "Plasterer", "Tiler", "Decorator"]
    wb = Workbook()
    ws = wb.active
    ws.title = "Plan"
    ws.append(["Task ID", "Task", "Duration (working days)", "Depends on", "Responsible"])
    for c in ws[1]:
        c.font = Font(bold=True)
    for tid, name, deps in order:
        ws.append([tid, name, dur[tid], ", ".join(deps), rng.choice(owners)])
    ws.column_dimensions["B"].width = 40
    ws.column_dimensions["D"].width = 14
    wb.properties.creator = "Renovation PM"
    wb.properties.created = FIXED_TIME
    wb.save(d / fname)
    normalize_ooxml(d / fname)
    return dict(
        slug=slug, level=3, file_name=fname, answer=str(ans),
        question=("The attached workbook is the plan for a kitchen renovation. Each task has a "
                  "duration in working days and may depend on other tasks, which must all be "
                  "finished before it can start. Any number of independent tasks can run in "
                  "parallel. What is the minimum number of working days needed to complete the "
                  "whole project?"),
        steps=["Load the plan and parse each task's duration and list of prerequisites.",
               "Process tasks in dependency (topological) order, computing each task's earliest "
               "finish as its duration plus the latest finish of its prerequisites.",
               "The project length is the largest earliest-finish time (the critical path)."],
        tools=["Python (pandas)", "Critical path method"],
    )


def t_orgchart_json(d: Path) -> dict:
    slug = "l3-org-chart-json"
    fname = "hr_org_export.json"
    for rng in attempts(slug):
        depts = ("Operations", "Engineering", "Sales", "Finance")
        plan = {dept: [rng.randint(1, 4) for _ in range(rng.randint(2, 3))] for dept in depts}
        headcount = 2 + len(depts) + sum(len(m) + sum(m) for m in plan.values())
        if headcount > len(FIRST):
            continue
        it = iter(unique_names(rng, headcount))
        emps = []

        def add(title, dept, salary, manager, emps=emps, it=it):
            eid = f"EMP{100 + len(emps) * 11:04d}"
            emps.append({"id": eid, "name": next(it), "title": title, "department": dept,
                         "annual_salary_eur": salary, "manager_id": manager})
            return eid

        ceo = add("Chief Executive Officer", "Executive", rng.randint(180, 240) * 1000, None)
        for dept in depts:
            vp = add(f"VP {dept}", dept, rng.randint(120, 160) * 1000, ceo)
            for n_spec in plan[dept]:
                mgr = add(f"{dept} Manager", dept, rng.randint(80, 105) * 1000, vp)
                for _ in range(n_spec):
                    add(f"{dept} Specialist", dept, rng.randint(42, 78) * 1000, mgr)
        add("Executive Assistant", "Executive", 52000, ceo)
        kids = {}
        for e in emps:
            kids.setdefault(e["manager_id"], []).append(e["id"])
        sal = {e["id"]: e["annual_salary_eur"] for e in emps}

        def subtree(eid, kids=kids):
            out = [eid]
            for k in kids.get(eid, []):
                out += subtree(k)
            return out

        direct = kids[ceo]
        totals = {v: sum(sal[x] for x in subtree(v)) for v in direct}
        sizes = {v: len(subtree(v)) for v in direct}
        ranked = sorted(totals.values(), reverse=True)
        best = max(totals, key=totals.get)
        if ranked[0] - ranked[1] < 20000:
            continue
        if max(sizes, key=sizes.get) == best or list(sizes.values()).count(max(sizes.values())) > 1:
            continue
        if max((sal[x] for x in direct), default=0) == sal[best]:
            continue
        break
    rng.shuffle(emps)
    byid = {e["id"]: e for e in emps}
    doc = {"export": "HR master data", "as_of": "2023-06-30", "company": "Lumen Freight Systems",
           "employees": emps}
    (d / fname).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return dict(
        slug=slug, level=3, file_name=fname, answer=byid[best]["name"],
        question=("The attached JSON file is an HR export in which each employee record points to "
                  "its manager. Consider the people who report directly to the Chief Executive "
                  "Officer. For each of them, add up the annual salaries of that person and "
                  "everyone below them in the reporting line (directly or indirectly). Whose group "
                  "has the highest total? Give that person's full name."),
        steps=["Load the employee records and build the manager -> direct reports mapping.",
               "Find the CEO (no manager) and the CEO's direct reports.",
               "For each direct report, collect their whole subtree and sum the salaries.",
               "Return the name of the direct report with the largest total."],
        tools=["Python (json)", "Tree traversal"],
    )


TASKS = [t_sales_xlsx, t_weather_csv, t_access_log_txt, t_inventory_json, t_prime_puzzle,
         t_report_pdf, t_minutes_docx, t_regional_pptx, t_timesheets_csv, t_orders_xlsx,
         t_monthly_zip, t_expenses_zip, t_ferry_pdf, t_project_xlsx, t_orgchart_json]


def record(t: dict) -> dict:
    steps = "\n".join(f"{i}. {s}" for i, s in enumerate(t["steps"], 1))
    tools = "\n".join(f"{i}. {s}" for i, s in enumerate(t["tools"], 1))
    return {
        "task_id": task_id(t["slug"]),
        "Question": t["question"],
        "Level": t["level"],
        "Final answer": t["answer"],
        "file_name": t["file_name"],
        "Annotator Metadata": {
            "Steps": steps,
            "Number of steps": str(len(t["steps"])),
            "Tools": tools,
        },
    }


def generate(out: Path) -> list[dict]:
    d = out / SPLIT_DIR
    d.mkdir(parents=True, exist_ok=True)
    records = []
    for fn in TASKS:
        t = fn(d)
        rec = record(t)
        records.append(rec)
        print(f"{rec['task_id']}  L{rec['Level']}  {rec['file_name'] or '-':40s}  {rec['Final answer']}")
    with (d / "metadata.jsonl").open("w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return records


def verify(out: Path, python: str) -> int:
    d = out / SPLIT_DIR
    sol_dir = out / "solutions"
    records = [json.loads(line) for line in (d / "metadata.jsonl").read_text(encoding="utf-8").splitlines() if line]
    failures = 0
    for rec in records:
        sol = sol_dir / f"{rec['task_id']}.py"
        with tempfile.TemporaryDirectory() as tmp:
            if rec["file_name"]:
                shutil.copy(d / rec["file_name"], Path(tmp) / rec["file_name"])
            try:
                proc = subprocess.run([python, str(sol)], cwd=tmp, capture_output=True,
                                      text=True, timeout=120)
                lines = proc.stdout.strip().splitlines()
                got = lines[-1].strip() if lines else ""
                err = proc.stderr.strip().splitlines()[-1:] if proc.returncode else []
            except Exception as exc:  # noqa: BLE001
                got, err = "", [repr(exc)]
        ok = got == rec["Final answer"]
        failures += not ok
        print(f"{'PASS' if ok else 'FAIL'}  {rec['task_id']}  L{rec['Level']}  "
              f"expected={rec['Final answer']!r} got={got!r} {' '.join(err)}")
    print(f"{len(records) - failures} passed, {failures} failed")
    return 1 if failures else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--verify", metavar="PYTHON",
                    help="run the reference solutions with this interpreter instead of generating")
    args = ap.parse_args()
    if args.verify:
        return verify(args.out, args.verify)
    generate(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
