// Serialize the current page to markdown-ish text inside the browser (so page content never
// reaches a parser on the host). Links, buttons and inputs get [N] references, stored on the
// elements as data-harness-ref, so an agent can click "7" or type into "3".
() => {
  const SKIP = new Set(["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE", "SVG", "HEAD", "IFRAME"]);
  const BLOCK = new Set(["P", "DIV", "SECTION", "ARTICLE", "MAIN", "HEADER", "FOOTER", "NAV", "ASIDE",
    "UL", "OL", "FORM", "FIELDSET", "BLOCKQUOTE", "PRE", "DL", "DT", "DD", "FIGURE", "BODY", "HR"]);
  const out = [];
  const links = [];
  let ref = 0;
  const squash = (s) => (s || "").replace(/\s+/g, " ").trim();
  const hidden = (el) => {
    const style = getComputedStyle(el);
    return style.display === "none" || style.visibility === "hidden";
  };
  const mark = (el) => { ref += 1; el.setAttribute("data-harness-ref", String(ref)); return ref; };
  document.querySelectorAll("[data-harness-ref]").forEach((el) => el.removeAttribute("data-harness-ref"));

  function inline(node) {
    const parts = [];
    for (const child of node.childNodes) walk(child, parts);
    return squash(parts.join(""));
  }

  function walk(node, acc) {
    if (node.nodeType === Node.TEXT_NODE) { acc.push(node.textContent.replace(/\s+/g, " ")); return; }
    if (node.nodeType !== Node.ELEMENT_NODE || SKIP.has(node.tagName) || hidden(node)) return;
    const tag = node.tagName;
    if (tag === "A" && node.getAttribute("href")) {
      const n = mark(node);
      links.push(`[${n}]: ${node.href}`);
      acc.push(` [${squash(node.innerText) || node.href}][${n}] `);
      return;
    }
    if (tag === "BUTTON" || (tag === "INPUT" && ["submit", "button", "reset"].includes(node.type))) {
      acc.push(` [button: ${squash(node.innerText || node.value) || "button"}][${mark(node)}] `);
      return;
    }
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT") {
      const label = node.getAttribute("aria-label") || node.placeholder || node.name || node.type;
      acc.push(` [input ${squash(label)}${node.value ? ` = "${node.value}"` : ""}][${mark(node)}] `);
      return;
    }
    if (/^H[1-6]$/.test(tag)) { acc.push(`\n\n${"#".repeat(Number(tag[1]))} ${inline(node)}\n\n`); return; }
    if (tag === "LI") { acc.push(`\n- ${inline(node)}`); return; }
    if (tag === "BR") { acc.push("\n"); return; }
    if (tag === "PRE") { acc.push("\n\n```\n" + node.innerText + "\n```\n\n"); return; }
    if (tag === "IMG") { const alt = squash(node.alt); if (alt) acc.push(` [image: ${alt}] `); return; }
    if (tag === "TABLE") {
      const rows = [...node.rows].map((row) => "| " + [...row.cells].map((c) => inline(c).replace(/\|/g, "\\|")).join(" | ") + " |");
      if (rows.length) rows.splice(1, 0, "|" + " --- |".repeat(node.rows[0].cells.length));
      acc.push("\n\n" + rows.join("\n") + "\n\n");
      return;
    }
    const block = BLOCK.has(tag);
    if (block) acc.push("\n\n");
    for (const child of node.childNodes) walk(child, acc);
    if (block) acc.push("\n\n");
  }

  walk(document.body || document.documentElement, out);
  let fenced = false;
  let text = out.join("").split("\n").map((l) => {
    if (l.trim() === "```") fenced = !fenced;
    return fenced ? l : l.replace(/[ \t]+/g, " ").trim();
  }).join("\n");
  text = text.replace(/\n{3,}/g, "\n\n").trim();
  if (links.length) text += "\n\nLinks:\n" + links.join("\n");
  return { title: document.title, url: location.href, text };
}
