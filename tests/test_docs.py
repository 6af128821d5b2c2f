"""The README stays short and every relative link of the README and docs/ lands: the file exists and,
for `#anchor`, a heading of that page makes it (GitHub's rule). docs/reference.md names every flag of
every command (`harness run`'s under the groups `run -h` shows) and every TOML key. Pure Python."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 250

FENCE = re.compile(r"^ *(```|~~~).*?^ *\1 *$", re.S | re.M)
INLINE_CODE = re.compile(r"`+[^`\n]*`+")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *#* *$", re.M)


def pages() -> list[Path]:
    found = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md"]
    return [p for p in found if p.is_file()]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text stays
    text = text.lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    result = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text())):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        result.add(base if n == 0 else f"{base}-{n}")
    return result


def links(page: Path) -> list[str]:
    text = INLINE_CODE.sub("", FENCE.sub("", page.read_text()))
    return [target for target in LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:", target)]


def broken(page: Path) -> list[str]:
    problems = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        goal = (page.parent / path).resolve() if path else page
        if not goal.exists():
            problems.append(f"{target}: no such file")
        elif anchor and goal.suffix == ".md" and anchor not in anchors(goal):
            problems.append(f"{target}: no heading #{anchor} in {goal.name}")
    return problems


def test_the_slug_follows_githubs_rule():
    assert slug("Recording and replaying the web (`--web-record`, `--web-replay`)") == \
        "recording-and-replaying-the-web---web-record---web-replay"
    assert slug("Calls in flight: `max_connections`") == "calls-in-flight-max_connections"
    assert slug("`[llm.NAME]`: a model") == "llmname-a-model"


def test_a_broken_link_or_anchor_is_found(tmp_path):
    (tmp_path / "b.md").write_text("# Title\n\n## Two words\n\n## Two words\n\n```\n## Not a heading\n```\n")
    (tmp_path / "a.md").write_text("[ok](b.md#two-words) [ok](b.md#two-words-1) [ok](#here) `[code](x.md)`\n"
                                   "## Here\n[bad](b.md#not-a-heading) [two\nlines](missing.md) [web](https://x.org/y)\n")
    assert broken(tmp_path / "a.md") == ["b.md#not-a-heading: no heading #not-a-heading in b.md",
                                         "missing.md: no such file"]


def test_the_readme_is_read_in_ten_minutes():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines, more than {README_MAX_LINES}"


def test_every_relative_link_of_the_readme_and_docs_resolves():
    assert {p.name for p in pages()} >= {"README.md", "reference.md", "architecture.md", "guide.md"}
    problems = {p.relative_to(ROOT).as_posix(): broken(p) for p in pages()}
    assert not {page: found for page, found in problems.items() if found}


# -- the reference follows the code ----------------------------------------------------------------------

REFERENCE = ROOT / "docs" / "reference.md"


def section(text: str, heading: str) -> str:
    return text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]


def test_every_run_flag_is_in_one_group_and_the_reference_lists_it_under_that_group():
    import inspect

    import typer

    from harness.cli import RUN_FLAG_GROUPS, app, run_cmd

    grouped = [name for names in RUN_FLAG_GROUPS.values() for name in names]
    assert sorted(grouped) == sorted(inspect.signature(run_cmd).parameters), "a run flag in no group, or in two"
    run = typer.main.get_command(app).commands["run"]
    opts = {param.name: param.opts[0] for param in run.params if param.name in grouped}
    flags = section(REFERENCE.read_text(), "## `harness run` flags")
    headings = [line[4:] for line in flags.splitlines() if line.startswith("### ")]
    assert headings == list(RUN_FLAG_GROUPS), "the reference's groups differ from run -h's (harness/cli.py)"
    tables = dict(zip(headings, flags.split("\n### ")[1:], strict=True))
    missing = [f"{opts[name]} (under {group})" for group, names in RUN_FLAG_GROUPS.items() for name in names
               if f"`{opts[name]}" not in tables[group]]
    assert not missing, f"docs/reference.md lacks run flags: {missing}"


def test_the_reference_names_every_flag_of_the_other_commands():
    import typer

    from harness.cli import app

    others = section(REFERENCE.read_text(), "## Other commands' flags")

    def walk(command, path):
        for name, sub in getattr(command, "commands", {}).items():
            if path or name != "run":
                yield from walk(sub, (*path, name))
        for param in getattr(command, "params", ()):
            if param.param_type_name == "option" and param.name != "help":
                yield path, param.opts[0]

    missing = [f"harness {' '.join(path)} {flag}" for path, flag in walk(typer.main.get_command(app), ())
               if f"`{flag}" not in others]
    assert not missing, f"docs/reference.md lacks: {missing}"


def test_the_reference_names_every_toml_key():
    from harness.environments.mcp_config import McpServer
    from harness.environments.websearch.settings import ProviderTable, SearchTable
    from harness.models.config import ModelSection

    keys = section(REFERENCE.read_text(), "## TOML keys")
    tables = {"[llm.NAME]": set(ModelSection.model_fields) - {"name"},
              "[mcp.NAME]": set(McpServer.model_fields) - {"name"},
              "[search]": set(SearchTable.model_fields) - {"tavily", "serper", "brave", "searxng"},
              "[search.PROVIDER]": set(ProviderTable.model_fields)}
    missing = [f"{table} {key}" for table, names in tables.items() for key in sorted(names) if f"`{key}`" not in keys]
    assert not missing, f"docs/reference.md's TOML keys lack: {missing}"


def test_the_architecture_layout_names_every_module_and_package_of_harness():
    layout = section((ROOT / "docs" / "architecture.md").read_text(), "## Layout")
    named = " ".join(line.split(" | ")[0] + " " + line.split(" | ")[1] for line in layout.splitlines()
                     if line.startswith("| `"))
    parts = [p for p in sorted((ROOT / "harness").iterdir()) if p.name != "__pycache__" and p.name != "__init__.py"
             and (p.suffix == ".py" or (p / "__init__.py").is_file())]
    assert len(parts) > 20
    missing = [p.name for p in parts if f"harness/{p.name}{'/' if p.is_dir() else ''}" not in named]
    assert not missing, f"docs/architecture.md's layout table lacks {missing}"


PATH_IN_CODE = re.compile(r"(?:harness|scripts|images|tests|bench|datasets|docs)/[\w./-]*")
SHIPPED_ONLY = {"harness/images/"}  # the wheel's copy of images/ (setup.py), not in a checkout


def stale_paths(text: str) -> list[str]:
    """Repository paths a page names in code spans that are not there (one with the placeholder NAME,
    harness/datasets/NAME.py, is a pattern, not a path; tests/helpers/e2e.rows is a module's attribute)."""
    found = {m.group(0).rstrip(".") for span in INLINE_CODE.findall(text) for m in PATH_IN_CODE.finditer(span)}

    def there(path: str) -> bool:
        module, _, attr = path.rpartition(".")
        return (ROOT / path).exists() or bool(attr.isidentifier() and module and (ROOT / f"{module}.py").is_file())

    return sorted(p for p in found if p not in SHIPPED_ONLY and "NAME" not in p and not there(p))


def test_every_path_the_readme_and_docs_name_exists():
    assert stale_paths("see `harness/cli.py`, `harness/gone.py`, `harness/cli.app`, `harness/cli.gone.py` and "
                       "`harness/datasets/NAME.py`") == ["harness/cli.gone.py", "harness/gone.py"]
    stale = {p.relative_to(ROOT).as_posix(): found for p in pages() if p.parent != ROOT / "bench"
             if (found := stale_paths(p.read_text()))}
    assert not stale, f"the docs name paths that are not in the repository: {stale}"


def test_the_reference_gives_each_run_flags_default():
    import typer

    from harness.cli import app

    flags = section(REFERENCE.read_text(), "## `harness run` flags")
    rows = [line for line in flags.splitlines() if line.startswith("| `--")]
    wrong = []
    for param in typer.main.get_command(app).commands["run"].params:
        default = param.default
        if default in (None, False, [], ()) or param.required:
            continue
        shown = [str(v) for v in (default if isinstance(default, list | tuple) else [default])]
        if isinstance(default, float) and default.is_integer():
            shown = [f"{default:g}"]
        (row,) = [r for r in rows if re.search(rf"`{param.opts[0]}[` ]", r)] or [""]
        cells = row.split(" | ")
        if len(cells) < 3 or not all(s in cells[1] for s in shown):
            wrong.append(f"{param.opts[0]} (default {default!r}): {row or 'no row'}")
    assert not wrong, "docs/reference.md's defaults differ from harness run's:\n" + "\n".join(wrong)


# What --network internet opens to agent code (issue 29 item 9), said wherever the policy is described.
OPENED = {"past the guard": ("blocked page", "directly"), "the host": ("0.0.0.0", "keyless model server", "unmetered")}


def unsaid(text: str) -> list[str]:
    """Which of OPENED's facts `text` does not state."""
    return [fact for fact, words in OPENED.items() if not all(w in " ".join(text.split()) for w in words)]


def test_network_internet_says_plainly_what_agent_code_reaches():
    """Every section of the README and docs/ that names `--network internet`, the reference's `--network` row
    and `run -h`'s help for it say that agent code can read a blocked page directly (the leakage guard filters the
    tools only) and reach a keyless model server on the host's 0.0.0.0, unmetered. Before, they said only that
    the browser and fetch_url reach the web."""
    import typer

    from harness.cli import app

    assert unsaid("the browser and fetch_url reach the web") == list(OPENED)
    places = {f"{page.relative_to(ROOT)} section {n}": text for page in pages()
              for n, text in enumerate(re.split(r"^#{1,6} ", FENCE.sub("", page.read_text()), flags=re.M))
              if "`--network internet`" in text}
    assert len(places) >= 3, places  # the README, the guide, the tools' Networks section at least
    (row,) = [line for line in REFERENCE.read_text().splitlines() if line.startswith("| `--network POLICY`")]
    (param,) = [p for p in typer.main.get_command(app).commands["run"].params if p.name == "network"]
    places |= {"docs/reference.md --network row": row, "run -h --network": str(getattr(param, "help", ""))}
    missing = {where: facts for where, text in places.items() if (facts := unsaid(text))}
    assert not missing, f"--network internet described without what it opens to agent code: {missing}"
