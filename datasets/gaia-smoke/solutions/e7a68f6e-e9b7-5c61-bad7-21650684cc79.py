# Reference solution: action-item owners absent from the meeting (docx).
import re

from docx import Document
from docx.table import Table
from docx.text.paragraph import Paragraph

doc = Document("project_falcon_minutes.docx")
missing = set()
attendees = []
meeting = None
for child in doc.element.body.iterchildren():
    tag = child.tag.split("}")[1]
    if tag == "p":
        text = Paragraph(child, doc).text.strip()
        if text.startswith("Meeting "):
            meeting = text
        elif text.startswith("Attendees:"):
            names = text.split(":", 1)[1].split(",")
            attendees = [re.sub(r"\(.*?\)", "", n).strip() for n in names]
    elif tag == "tbl":
        table = Table(child, doc)
        header = [c.text.strip() for c in table.rows[0].cells]
        owner_col = header.index("Owner")
        for row in table.rows[1:]:
            owner = row.cells[owner_col].text.strip()
            if owner not in attendees:
                print(f"{meeting}: {owner} not present")
                missing.add(owner)
print(", ".join(sorted(missing)))
