"""Northwind Garden Supply: a small offline shop website for the gaia-smoke browsing tasks.

Written for this project. Stdlib only; deterministic content. Pages: / (index), /catalog?page=N
(a paginated product table), /product/SKU, /search?q= (a form), /reports (downloads),
/files/supplier-deliveries-2023.csv, /about, /sitemap.xml, a safety notice (NOTICE) linked from no page,
only listed in the sitemap (found by the `site` search provider's crawl, not by following links), and /slow
(never answers in time: for timeout tests).
"""

import csv
import html
import io
import random
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

rng = random.Random(20231105)
CATEGORIES = ["Irrigation", "Tools", "Seeds", "Furniture"]
NAMES = {
    "Irrigation": ["Soaker Hose 15 m", "Drip Line Kit", "Oscillating Sprinkler", "Hose Reel Cart", "Rain Barrel 200 L",
                   "Timer Valve"],
    "Tools": ["Bypass Pruner", "Border Spade", "Hand Trowel", "Leaf Rake", "Loppers", "Hori Hori Knife"],
    "Seeds": ["Heirloom Tomato Seeds", "Wildflower Mix", "Runner Bean Seeds", "Basil Seeds", "Sweet Pea Seeds",
              "Kale Seeds"],
    "Furniture": ["Teak Bench", "Folding Chair", "Bistro Table", "Hammock Stand", "Potting Bench", "Deck Chair"],
}
PRODUCTS = []
for cat in CATEGORIES:
    for i, name in enumerate(NAMES[cat]):
        PRODUCTS.append({"sku": f"{cat[:3].upper()}-{101 + i}", "name": name, "category": cat,
                         "price": round(rng.uniform(4, 240), 2), "stock": rng.randint(0, 90),
                         "warranty": rng.choice([1, 2, 3, 5]), "supplier": rng.choice(
                             ["Greenleaf Ltd", "Aqua Flow GmbH", "Hartmann Tools", "Seedwell Co"])})
PRODUCTS.sort(key=lambda p: p["name"])
PER_PAGE = 8
SUPPLIERS = ["Greenleaf Ltd", "Aqua Flow GmbH", "Hartmann Tools", "Seedwell Co", "Oakridge Timber"]
DELIVERIES = []
for month in range(1, 13):
    for supplier in SUPPLIERS:
        for _ in range(rng.randint(1, 3)):
            DELIVERIES.append({"date": f"2023-{month:02d}-{rng.randint(1, 28):02d}", "supplier": supplier,
                               "sku": rng.choice(PRODUCTS)["sku"], "quantity": rng.randint(5, 120)})
DELIVERIES.sort(key=lambda d: (d["date"], d["supplier"]))
NOTICE = {"path": "/notices/safety-recall-2023", "batch": "HRC-2317", "title": "Safety notice: Hose Reel Cart recall"}
SITEMAP = ["/", "/catalog", "/reports", "/about", NOTICE["path"]]


def page(title, body):
    nav = ('<nav><a href="/">Home</a> | <a href="/catalog">Catalog</a> | <a href="/reports">Reports</a> | '
           '<a href="/about">About us</a></nav>')
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head>"
            f"<body>{nav}<h1>{html.escape(title)}</h1>{body}</body></html>")


def product_table(items):
    rows = "".join(f"<tr><td><a href='/product/{p['sku']}'>{html.escape(p['name'])}</a></td><td>{p['category']}</td>"
                   f"<td>{p['price']:.2f}</td><td>{p['stock']}</td></tr>" for p in items)
    return f"<table><tr><th>Product</th><th>Category</th><th>Price (EUR)</th><th>In stock</th></tr>{rows}</table>"


def route(path, query):
    if path == "/":
        return 200, page("Northwind Garden Supply", (
            "<p>Everything for the garden since 1987.</p>"
            "<form action='/search' method='get'><input name='q' aria-label='Search products' placeholder='Search products'>"
            "<button type='submit'>Search</button></form>"
            "<ul><li><a href='/catalog'>Browse the catalog</a></li><li><a href='/reports'>Supplier reports</a></li></ul>"))
    if path == "/catalog":
        pages = (len(PRODUCTS) + PER_PAGE - 1) // PER_PAGE
        n = max(1, min(pages, int(query.get("page", "1") or 1)))
        items = PRODUCTS[(n - 1) * PER_PAGE: n * PER_PAGE]
        links = []
        if n > 1:
            links.append(f"<a href='/catalog?page={n - 1}'>Previous page</a>")
        if n < pages:
            links.append(f"<a href='/catalog?page={n + 1}'>Next page</a>")
        return 200, page(f"Catalog (page {n} of {pages})", product_table(items) + "<p>" + " ".join(links) + "</p>")
    if path.startswith("/product/"):
        sku = path.rsplit("/", 1)[1]
        match = [p for p in PRODUCTS if p["sku"] == sku]
        if not match:
            return 404, page("Not found", "<p>No such product.</p>")
        p = match[0]
        return 200, page(p["name"], (
            f"<dl><dt>SKU</dt><dd>{p['sku']}</dd><dt>Category</dt><dd>{p['category']}</dd>"
            f"<dt>Price</dt><dd>{p['price']:.2f} EUR</dd><dt>Supplier</dt><dd>{p['supplier']}</dd>"
            f"<dt>Warranty</dt><dd>{p['warranty']} years</dd></dl>"))
    if path == "/search":
        q = query.get("q", "").strip().lower()
        found = [p for p in PRODUCTS if q and q in p["name"].lower()]
        return 200, page(f"Search results for '{html.escape(q)}'",
                         product_table(found) if found else "<p>No products found.</p>")
    if path == "/reports":
        return 200, page("Supplier reports", (
            "<p>Deliveries received from our suppliers in 2023, one row per delivery.</p>"
            "<p><a href='/files/supplier-deliveries-2023.csv'>Supplier deliveries 2023 (CSV)</a></p>"))
    if path == "/files/supplier-deliveries-2023.csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=["date", "supplier", "sku", "quantity"])
        writer.writeheader()
        writer.writerows(DELIVERIES)
        return 200, buf.getvalue().encode()
    if path == "/about":
        return 200, page("About us", "<p>Founded in 1987 in Ravensworth by Edith Marlow.</p>")
    if path == NOTICE["path"]:
        return 200, page(NOTICE["title"], (
            f"<p>Published 6 November 2023. Hose Reel Cart units from production batch {NOTICE['batch']} may have a "
            "weak axle weld that can crack under a full hose. Stop using the cart and bring it to our Ravensworth "
            "store for a free replacement. Units from other batches are not affected.</p>"))
    if path == "/sitemap.xml":
        urls = "".join(f"<url><loc>http://shop.gaia.test{p}</loc></url>" for p in SITEMAP)
        return 200, ("<?xml version='1.0' encoding='UTF-8'?><urlset "
                     f"xmlns='http://www.sitemaps.org/schemas/sitemap/0.9'>{urls}</urlset>").encode()
    if path == "/slow":
        time.sleep(600)
    return 404, page("Not found", "<p>No such page.</p>")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        status, body = route(url.path, dict(urllib.parse.parse_qsl(url.query)))
        csv_file = isinstance(body, bytes) and url.path != "/sitemap.xml"
        data = body if isinstance(body, bytes) else body.encode()
        self.send_response(status)
        kind = "text/csv" if csv_file else "application/xml" if url.path == "/sitemap.xml" else "text/html; charset=utf-8"
        self.send_header("Content-Type", kind)
        if csv_file:
            self.send_header("Content-Disposition", 'attachment; filename="supplier-deliveries-2023.csv"')
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    server = ThreadingHTTPServer(("0.0.0.0", 80), Handler)
    print("ready", flush=True)
    server.serve_forever()
