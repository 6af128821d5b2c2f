"""The `harness` command line."""

from __future__ import annotations

import sys
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from harness.errors import HarnessError, InputError

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
images_app = typer.Typer(no_args_is_help=True, help="Build and list sandbox images.")
app.add_typer(images_app, name="images")
console = Console(stderr=True)


def fail(exc: HarnessError) -> None:
    console.print(f"[red]error ({exc.kind}):[/red] {exc}")
    raise typer.Exit(2 if isinstance(exc, InputError) else 1)


@images_app.command("build")
def images_build(force: bool = typer.Option(False, help="Rebuild even when the tag exists.")) -> None:
    """Build the sandbox image (and an offline Debian base when none can be pulled)."""
    from harness.images.build import build

    try:
        tag = build(force=force, log=lambda m: console.print(m))
    except HarnessError as exc:
        fail(exc)
    print(tag)


@images_app.command("list")
def images_list() -> None:
    """Show the harness images on the engine."""
    from harness.images.build import list_images, sandbox_tag

    current = sandbox_tag()
    table = Table("tag", "id", "size (MB)", "created", "current")
    for info in list_images():
        table.add_row(info.tag, info.id, f"{info.size_mb:.0f}", info.created, "*" if info.tag == current else "")
    Console().print(table)


@app.command()
def cleanup(
    run_id: Optional[str] = typer.Option(None, "--run-id", help="Remove every container of this run."),
    everything: bool = typer.Option(False, "--all", help="Remove every harness container."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only list what would be removed."),
) -> None:
    """Remove harness containers whose owner process is gone (never others' containers)."""
    from harness.sandbox.docker.cleanup import reap

    try:
        removed = reap(run_id=run_id, everything=everything, dry_run=dry_run)
    except HarnessError as exc:
        fail(exc)
    verb = "would remove" if dry_run else "removed"
    for item in removed:
        print(f"{verb} {item.name} (run {item.run_id}, owner {item.owner}, {item.state})")
    console.print(f"{verb} {len(removed)} container(s)")


@app.command()
def smoke(
    sandboxes: int = typer.Option(4, "--sandboxes", "-n", min=1, help="Sandboxes to start in parallel."),
) -> None:
    """Start sandboxes in parallel, copy a file in, run commands, tear them down."""
    from harness.sandbox.smoke import run_smoke

    try:
        ok = run_smoke(sandboxes, log=lambda m: console.print(m))
    except HarnessError as exc:
        fail(exc)
    raise typer.Exit(0 if ok else 1)


def main() -> None:  # pragma: no cover - console entry for `python -m harness`
    sys.exit(app())
