"""The `harness` command line."""

from __future__ import annotations

import os
from pathlib import Path

# pydantic looks for plug-ins in every installed distribution's entry points at its first model (~20 ms
# of every command); the harness uses none. A user who sets the variable keeps their choice.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

import typer  # noqa: E402 - after the variable above: typer imports pydantic
from rich.console import Console
from rich.table import Table

from harness import exit_codes
from harness.errors import HarnessError, InputError
from harness.terminal import flat, say, stderr_console

HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}  # every command, subcommands inherit it
app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__, context_settings=HELP_OPTIONS)
images_app = typer.Typer(no_args_is_help=True, help="Build and list sandbox images.", context_settings=HELP_OPTIONS)
app.add_typer(images_app, name="images")
console = stderr_console()


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"harness {version('harness')}")
        except PackageNotFoundError:
            print("harness (version unknown: the package is not installed)")
        raise typer.Exit()


@app.callback()
def main(_version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                       help="Print the harness version and exit.")) -> None:
    """The `harness` command line."""


SANDBOX_HELP = "Sandbox provider: docker (default), swarm, or module:Class."


DOCKER_HOST_HELP = ("Docker engine URL: unix://PATH, tcp://HOST:PORT (TLS: HARNESS_DOCKER_CERT_PATH) or "
                    "ssh://USER@HOST. Default: HARNESS_DOCKER_HOST, DOCKER_HOST, else the local socket.")


def _docker_host_option():
    return typer.Option(None, "--docker-host", help=DOCKER_HOST_HELP)


def _provider(name: str, docker_host: str | None = None):
    from harness.sandbox.registry import get_provider

    if docker_host:
        _use_docker_host(docker_host)
    try:
        return get_provider(name)
    except HarnessError as exc:
        fail(exc)


def _images(name: str, docker_host: str | None, operation: str):
    """The provider for `harness images ...`; one without images of its own (`capabilities.images`) declines."""
    provider = _provider(name, docker_host)
    if not provider.capabilities.images:
        fail(provider.no_images(operation))
    return provider


def _use_docker_host(url: str) -> None:
    """--docker-host: the engine of this process and of the agent processes it starts (they inherit
    HARNESS_DOCKER_HOST), read through the settings like every other HARNESS_* value."""
    from harness import settings

    if "://" not in url:
        fail(InputError(f"--docker-host {url!r}: expected unix://PATH, tcp://HOST:PORT or ssh://USER@HOST"))
    try:
        settings.use(docker_host=url)
    except HarnessError as exc:
        fail(exc)


def fail(exc: HarnessError) -> None:
    """One line on stderr, the message as it is (no markup, no wrapping, a multi-line message joined
    into one: harness/terminal.py `flat`); exit 2 for input, else 1."""
    say(console, f"error ({exc.kind}): {flat(exc)}", style="red")
    raise typer.Exit(exit_codes.INPUT if isinstance(exc, InputError) else exit_codes.FAILED)


def log(message: str) -> None:
    say(console, message)


@images_app.command("build")
def images_build(force: bool = typer.Option(False, help="Rebuild even when the tag exists."),
                 sandbox: str = typer.Option("docker", help=SANDBOX_HELP),
                 docker_host: str | None = _docker_host_option()) -> None:
    """Make the sandbox image present on the engine: copied from this machine's engine when it has
    it, else built there (and an offline Debian base when none can be pulled)."""
    try:
        tag = _images(sandbox, docker_host, "build_image").build_image(force=force, log=log)
    except HarnessError as exc:
        fail(exc)
    print(tag)


@images_app.command("list")
def images_list(sandbox: str = typer.Option("docker", help=SANDBOX_HELP),
                docker_host: str | None = _docker_host_option()) -> None:
    """Show the harness images on the engine: a table on a terminal, else tab-separated lines (whole tags)."""
    try:
        found = _images(sandbox, docker_host, "list_images").list_images()
    except HarnessError as exc:
        fail(exc)
    header = ("tag", "id", "size (MB)", "created", "current")
    lines = [(info.tag, info.id, f"{info.size_mb:.0f}", info.created, "*" if info.current else "") for info in found]
    stdout = Console()
    if not stdout.is_terminal:  # a pipe or a file: nothing cut to a width no one has
        print("\n".join("\t".join(line) for line in [header, *lines]))
        return
    table = Table()
    for name in header:  # a narrow terminal wraps a tag, never cuts it
        table.add_column(name, overflow="fold", no_wrap=name in ("id", "created"))
    for line in lines:
        table.add_row(*line)
    stdout.print(table)


@images_app.command("prune")
def images_prune(sandbox: str = typer.Option("docker", help=SANDBOX_HELP),
                 docker_host: str | None = _docker_host_option()) -> None:
    """Remove sandbox images of older build contexts (the current one and the base stay)."""
    try:
        removed = _images(sandbox, docker_host, "prune_images").prune_images(log=log)
    except HarnessError as exc:
        fail(exc)
    for tag in removed:
        print(f"removed {tag}")


@app.command()
def cleanup(
    run_id: str | None = typer.Option(None, "--run-id", help="Remove every container of this run."),
    everything: bool = typer.Option(False, "--all", help="Remove every harness container."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only list what would be removed."),
    sandbox: str = typer.Option("docker", help=SANDBOX_HELP),
    docker_host: str | None = _docker_host_option(),
) -> None:
    """Remove harness containers whose owner process is gone (never others' containers)."""
    try:
        removed = _provider(sandbox, docker_host).cleanup(run_id=run_id, everything=everything, dry_run=dry_run)
    except HarnessError as exc:
        fail(exc)
    verb = "would remove" if dry_run else "removed"
    for item in removed:
        print(f"{verb} {item.name} (run {item.run_id}, owner {item.owner}, {item.state})")
    say(console, f"{verb} {len(removed)} container(s)")


@app.command()
def benchmarks() -> None:
    """List the benchmarks the harness knows (built-in and registered by installed packages: harness/benchmark.py)."""
    from harness.benchmark import registered

    try:
        known = registered()
    except HarnessError as exc:
        fail(exc)
    for b in known:
        exports = f"; exports: {', '.join(b.exports)}" if b.exports else ""
        print(f"{b.name}: {b.title} (scorers: {', '.join(b.default_scorers)}; epochs: {b.epochs}{exports})")


@app.command()
def smoke(
    sandboxes: int = typer.Option(4, "--sandboxes", "-n", min=1, help="Sandboxes to start in parallel."),
    sandbox: str = typer.Option("docker", help=SANDBOX_HELP),
    docker_host: str | None = _docker_host_option(),
) -> None:
    """Start sandboxes in parallel, copy a file in, run commands, tear them down."""
    from harness.sandbox.smoke import run_smoke

    try:
        ok = run_smoke(_provider(sandbox, docker_host), sandboxes, log=log)
    except HarnessError as exc:
        fail(exc)
    raise typer.Exit(0 if ok else 1)


@app.command("run")
def run_cmd(
    dataset: Path = typer.Option(..., help="GAIA folder (metadata.jsonl/.parquet), a .jsonl/.csv file, or a "
                                           "Hugging Face Hub dataset hf://OWNER/NAME[@REVISION]."),
    model: str | None = typer.Option(None, help="A \\[llm.NAME] section of --config, 'replay', or "
                                               "openai-compatible/NAME with --model-base-url (no config needed); "
                                               "required but with --agent oracle or nop, which call no model."),
    model_base_url: str | None = typer.Option(None, help="With --model openai-compatible/NAME: the server's "
                                                            "OpenAI-compatible address (http://HOST:PORT/v1)."),
    model_key_env: str | None = typer.Option(None, help="With --model openai-compatible/NAME: the variable "
                                                           "holding the key (default: OPENAI_API_KEY if set)."),
    output_dir: Path | None = typer.Option(None, help="Results go to DIR/output.jsonl; re-running resumes. "
                                                         "Default: runs/<dataset>-<YYYYmmdd-HHMMSS>."),
    split: str | None = typer.Option(None, help="With a GAIA root: use 2023/SPLIT/ (a Hub parquet "
                                                                "dataset: SPLIT-*.parquet)."),
    subset: str | None = typer.Option(None, help="A folder of the dataset: a Hub config (e.g. execution, search, "
                                                 "adaptability, time, ambiguity or mini)."),
    agent: str = typer.Option("assistant", help="Built-in agent name, module:function, or sandbox:COMMAND "
                                                "(a program run inside the sandbox)."),
    workers: int = typer.Option(2, help="Instances run in parallel."),
    config: Path | None = typer.Option(None, help="TOML file with \\[llm.NAME] sections."),
    max_retries: int = typer.Option(2, help="Retries of infrastructure failures, each on a fresh sandbox."),
    instance_timeout: float = typer.Option(600, help="Wall seconds per instance (the agent is killed)."),
    max_steps: int = typer.Option(30, help="Model calls per instance."),
    max_tokens: int | None = typer.Option(None, help="Tokens (prompt+completion) per instance."),
    max_instance_cost: float | None = typer.Option(None, help="Dollars per instance, at the models' prices "
                                                              "(the instance ends as a limit)."),
    max_cost: float | None = typer.Option(None, help="Dollars for the run, at the models' prices: no instance "
                                                     "starts once it is spent, running ones stop at their next "
                                                     "model call (limit max_cost); exit 3."),
    command_timeout: float = typer.Option(120, help="Seconds per code-environment command."),
    page_size: int = typer.Option(8000, help="Characters per page of a file or web page shown to the agent."),
    limit: int | None = typer.Option(None, help="Run at most N instances."),
    ids: str | None = typer.Option(None, help="Comma-separated instance ids to run."),
    skip: str | None = typer.Option(None, help="Comma-separated instance ids to skip."),
    level: str | None = typer.Option(None, help="Comma-separated levels to run (GAIA's 1, 2, 3)."),
    offset: int = typer.Option(0, help="Start at this index (sharding: --offset K --stride N)."),
    stride: int = typer.Option(1, help="Take every N-th instance."),
    shuffle: bool = typer.Option(False, help="Shuffle before offset/stride/limit."),
    seed: int = typer.Option(0, help="Seed for --shuffle."),
    scorer: list[str] | None = typer.Option(None, help="Scorers; the first decides 'correct' (default: the "
                                                       "benchmark's own: harness benchmarks lists them)."),
    network: str = typer.Option("none", help="none, internet, or internal:NAME. With internet, agent code can read a "
                                              "blocked page directly (the leakage guard filters the tools only) and "
                                              "reach any host service on 0.0.0.0, such as a keyless model server, "
                                              "unmetered (docs/tools.md#networks)."),
    memory: str = typer.Option("2g", help="Memory per sandbox."),
    cpus: float = typer.Option(1.0, help="CPUs per sandbox."),
    disk: str = typer.Option("2g", help="Writable space per sandbox (files anywhere; beyond it: no space left). "
                                        "Without a storage quota it is RAM, added to --memory."),
    force: bool = typer.Option(False, help="Resume even though the configuration changed."),
    epochs: int | None = typer.Option(None, help="Run each instance K times, each in a fresh sandbox (default: the "
                                                 "benchmark's, 1 but for a benchmark that says otherwise)."),
    warm_pool: int = typer.Option(0, help="Keep N sandboxes started ahead of the instances (each used once)."),
    reducer: list[str] = typer.Option([], help="With --epochs: mean (default), majority, pass@K, pass^K, at_least_N; "
                                               "repeat for several, the first is the headline."),
    record: Path | None = typer.Option(None, help="Append the model's turns to this replay file."),
    cache: Path | None = typer.Option(None, help="For development: answer a model request asked before from this "
                                                 "folder instead of the provider, and keep new replies there "
                                                 "(keyed by model, messages, tools, sampling, epoch)."),
    cache_judge: bool = typer.Option(False, help="With --cache: the LLM judge's calls use it too."),
    judge_model: str | None = typer.Option(None, help="\\[llm.NAME] section for --scorer llm_judge."),
    website: Path | None = typer.Option(None, help="Offline site folder to serve on an internal network."),
    web_record: bool = typer.Option(False, help="Record every page the browsers load (a --website run) in "
                                                "RUN_DIR/web/ as WARC, through a proxy of the run's own."),
    web_replay: list[Path] = typer.Option([], help="Serve only the web recorded by this earlier --web-record run "
                                                   "(repeatable); unrecorded pages get an error page (web_miss)."),
    search: str | None = typer.Option(None, help="web_search's provider: tavily, serper, brave, searxng, site (the "
                                                 "--website, crawled once), none (default: \\[search] provider, "
                                                 "else site with --website, else none)."),
    search_block: list[str] = typer.Option([], help="Block a domain or URL pattern in search results and the "
                                                    "browser, beside the defaults (GAIA's published copies); "
                                                    "'none' drops the defaults."),
    no_search_cache: bool = typer.Option(False, "--no-search-cache",
                                         help="Ask the search provider every time (no per-run cache)."),
    mcp: list[str] = typer.Option([], help="NAME=COMMAND: a stdio MCP server started in each sandbox, its tools "
                                           "offered as NAME__TOOL (repeatable; also \\[mcp.NAME] in --config)."),
    prompt_template: Path | None = typer.Option(None, help="The task's instruction, a text file with {question}, "
                                                              "{files}, {conventions}, {instance_id} (default: the "
                                                              "question, its files, the benchmark's answer rules)."),
    sandbox: str = typer.Option("docker", help=SANDBOX_HELP),
    docker_host: str | None = _docker_host_option(),
    user_reply: str | None = typer.Option(None, help="What the simulated user says to a turn that ends "
                                                        "without <solution> (default: carry on alone)."),
    max_user_replies: int = typer.Option(3, help="Simulated user replies per instance (0: none)."),
    user_function: str | None = typer.Option(None, help="module:function(final_message, instance, number) "
                                                           "-> reply or None, instead of --user-reply."),
    fail_on_error: str | None = typer.Option(None, help="Start no more instances once N have errored "
                                                           "(or a fraction, 0.2 or 20%, of those selected); "
                                                           "exit 3."),
    fail_on_divergence: bool = typer.Option(False, help="With a replay model: exit 5 when a tool result differs "
                                                        "from the recording's fingerprint of it, or has none to "
                                                        "be checked against."),
) -> None:
    """Evaluate an agent on a dataset, one sandbox per instance.

    Exit codes: 0 every selected instance ended without an error; 1 the harness failed (or
    left containers); 2 bad input, before any container; 3 some instance errored or was not
    run; 4 the output dir stopped taking files mid-run (rows kept; the message says where); 5
    --fail-on-divergence and the replay diverged from its recording; 128+N ended by signal N (130
    Ctrl-C, 143 SIGTERM, 129 SIGHUP)."""
    from harness.agents.registry import NO_MODEL
    from harness.config import RunConfiguration
    from harness.runner.run import run
    from harness.signals import exit_code, interrupts, stopped_by

    if docker_host:
        _use_docker_host(docker_host)
    split_list = lambda text: tuple(x.strip() for x in text.split(",") if x.strip()) if text else None  # noqa: E731
    if model is None and agent not in NO_MODEL:
        fail(InputError("--model is required (but with --agent oracle or nop, which call no model)"))
    model = model or "replay"  # oracle and nop: a replay section whose file need not exist (runner/preflight.py)
    defaulted = output_dir is None
    if output_dir is None:
        from harness.results.layout import default_run_dir

        output_dir = default_run_dir(dataset, "-".join(x for x in (subset, split) if x) or None)
    try:
        configuration = RunConfiguration.from_flags(
            dataset=dataset, subset=subset, model=model, model_base_url=model_base_url, model_key_env=model_key_env,
            config=config, scorers=scorer, judge_model=judge_model, agent=agent, prompt_template=prompt_template,
            search=search, search_block=search_block, no_search_cache=no_search_cache, mcp=mcp,
            selection={"ids": split_list(ids), "skip": split_list(skip), "level": split_list(level),
                       "offset": offset, "stride": stride,
                       "shuffle": shuffle, "seed": seed, "limit": limit},
            limits={"max_steps": max_steps, "max_tokens": max_tokens, "instance_timeout": instance_timeout,
                    "command_timeout": command_timeout, "page_size": page_size,
                    **({"max_instance_cost": max_instance_cost} if max_instance_cost is not None else {})},
            sandbox={"provider": sandbox, "network": network, "memory": memory, "cpus": cpus, "disk": disk,
                     "website": website, "warm_pool": warm_pool,
                     **({"web_record": True} if web_record else {}),
                     **({"web_replay": tuple(web_replay)} if web_replay else {})},
            execution={"workers": workers, "max_retries": max_retries, "fail_on_error": fail_on_error,
                       "max_cost": max_cost},
            user={"max_replies": max_user_replies, "function": user_function,
                  **({"reply": user_reply} if user_reply else {})},
            epochs={"count": 1 if epochs is None else epochs, "given": epochs is not None, "reducers": reducer},
            split=split,
            replay={"fail_on_divergence": fail_on_divergence, "record": record, "cache": cache,
                    "cache_judge": cache_judge},
            output={"dir": output_dir, "force": force})
    except HarnessError as exc:
        fail(exc)
    if defaulted:
        log(f"output directory: {output_dir} (to resume this run: --output-dir {output_dir})")
    try:
        with interrupts():
            code = run(configuration, console)
    except HarnessError as exc:
        fail(exc)
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP: the run has cleaned up already
        say(console, f"{stopped_by(exc)}: finished rows are kept in {output_dir / 'output.jsonl'}; "
                     f"to resume, run again with --output-dir {output_dir}", style="yellow")
        raise typer.Exit(exit_code(exc)) from None
    raise typer.Exit(code)


# `harness run -h` shows its flags in these groups, in the order their first flag is declared above;
# docs/reference.md lists them under the same headings (tests/test_docs.py holds the two together).
RUN_FLAG_GROUPS: dict[str, tuple[str, ...]] = {
    "Dataset and selection": ("dataset", "split", "subset", "limit", "ids", "skip", "level", "offset", "stride",
                              "shuffle", "seed"),
    "Model": ("model", "model_base_url", "model_key_env", "config", "record", "cache", "cache_judge"),
    "Run control and output": ("output_dir", "workers", "max_retries", "force", "fail_on_error", "fail_on_divergence"),
    "Agent and prompt": ("agent", "prompt_template", "mcp", "user_reply", "user_function", "max_user_replies"),
    "Limits and budgets": ("instance_timeout", "max_steps", "max_tokens", "max_instance_cost", "max_cost",
                           "command_timeout", "page_size"),
    "Scoring and epochs": ("scorer", "judge_model", "epochs", "reducer"),
    "Sandbox": ("sandbox", "docker_host", "network", "memory", "cpus", "disk", "warm_pool"),
    "Web and search": ("website", "web_record", "web_replay", "search", "search_block", "no_search_cache"),
}


def _group_run_flags() -> None:
    import inspect

    options = inspect.signature(run_cmd).parameters
    for group, names in RUN_FLAG_GROUPS.items():
        for name in names:
            options[name].default.rich_help_panel = group


_group_run_flags()


@app.command("score")
def score_cmd(
    output_dir: Path = typer.Argument(..., help="A run's output directory."),
    scorer: list[str] | None = typer.Option(None, help="Scorers; the first decides 'correct' (default: those "
                                                       "the run was scored with)."),
    config: Path | None = typer.Option(None, help="TOML config (for the judge's model section)."),
    judge_model: str | None = typer.Option(None, help="\\[llm.NAME] section for --scorer llm_judge."),
) -> None:
    """Rescore a run's answers without re-running agents; rewrites report.json. Exit 3 when a verdict is missing."""
    from harness.config import Scoring, TomlConfig
    from harness.runner.rescore import rescore

    try:
        report = rescore(output_dir, Scoring.from_flags(scorer, judge_model, TomlConfig(config)))
    except HarnessError as exc:
        fail(exc)
    from harness.report import render

    Console().print(render(report))
    if (unjudged := report.missing_verdicts()) is not None:  # a scorer failed: counted, said, exit 3
        say(console, unjudged, style="red")
        raise typer.Exit(exit_codes.INSTANCE_ERRORS)


@app.command("report")
def report_cmd(
    output_dirs: list[Path] = typer.Argument(
        ..., help="Run output directories; with several, the first is the baseline."),
    html: bool = typer.Option(False, "--html", help="Write one self-contained HTML report."),
    out: Path | None = typer.Option(None, "--out", help="The HTML file (default: DIR/report.html of the first DIR)."),
    compare: bool = typer.Option(False, "--compare", help="Compare runs of another dataset or selection too "
                                                          "(over the instances they have in common)."),
) -> None:
    """Report on finished or running runs: the HTML report with --html, else the terminal table."""
    for d in output_dirs:
        if not (d / "output.jsonl").exists() and not (d / "run.json").exists():
            fail(InputError(f"{d} is not a run output directory (no output.jsonl or run.json)"))
    if html:
        from harness.report.html import write_html_report

        target = out or output_dirs[0] / "report.html"
        write_html_report(list(output_dirs), target, force=compare)
        size = target.stat().st_size
        log(f"wrote {target} ({size / 1024:.0f} KiB)")
        return
    from harness.report import render
    from harness.report.html import build_data
    from harness.report.load import read_report
    from harness.report.output import end_lines

    stdout = Console()
    for d in output_dirs:  # each run's table, as the run printed it (report/load.py: report.json or rebuilt)
        report, rebuilt = read_report(d)
        say(stdout, f"{d}" + (f": {rebuilt}" if rebuilt else ""))
        stdout.print(render(report))
        for line in end_lines(report):
            say(stdout, line)
    if len(output_dirs) > 1:  # each run against the first, paired by instance (report/compare.py)
        from harness.report.compare import comparison_line

        for c in build_data(list(output_dirs), with_traces=False, force=compare)["comparisons"]:
            log(comparison_line(c))


@app.command("compare")
def compare_cmd(
    output_dirs: list[Path] = typer.Argument(..., help="Two or more run directories; the first is the baseline."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparisons as JSON on stdout."),
    html: Path | None = typer.Option(None, "--html", help="Also write the HTML report of the runs to this file."),
    force: bool = typer.Option(False, "--force", help="Compare runs of another dataset or selection too (over the "
                                                      "instances they have in common)."),
) -> None:
    """Is run B better than run A? Each run against the first, paired by instance: fixed, broken, unchanged,
    not comparable; the paired difference and its interval; an exact McNemar test (a paired bootstrap for
    graded values), against the runs' measured noise floor when `harness noise` measured one. Exit 0."""
    import json

    from harness.report.compare import comparison_text
    from harness.report.html import build_data

    if len(output_dirs) < 2:
        fail(InputError("harness compare needs two or more run directories (the first is the baseline)"))
    for d in output_dirs:
        if not (d / "output.jsonl").exists() and not (d / "run.json").exists():
            fail(InputError(f"{d} is not a run output directory (no output.jsonl or run.json)"))
    comparisons = build_data(list(output_dirs), with_traces=False, force=force, calls=True)["comparisons"]
    refused = [c for c in comparisons if c["reasons"] and not c["forced"]]
    if refused:  # like with like only, unless --force: bad input, before anything is written
        fail(InputError("; ".join(f"{c['other']} vs {c['base']}: not compared: {'; '.join(c['reasons'])}"
                                  for c in refused) + " (--force compares them over the instances they share)"))
    if html is not None:
        from harness.report.html import write_html_report

        write_html_report(list(output_dirs), html, force=force)
        log(f"wrote {html}")
    if as_json:
        print(json.dumps(comparisons, indent=2, default=str))
        return
    stdout = Console()
    for c in comparisons:
        for line in comparison_text(c):
            say(stdout, line)


@app.command("noise", context_settings={**HELP_OPTIONS, "allow_extra_args": True})
def noise_cmd(
    ctx: typer.Context,
    output_dir: Path = typer.Argument(..., help="A finished run's output directory."),
    reruns: int = typer.Option(3, "--reruns", help="How many times to rerun the instances (and re-judge them)."),
    limit: int | None = typer.Option(None, "--limit", help="Rerun the first N instances that ended with a verdict "
                                                           "(default: all of them)."),
    config: Path | None = typer.Option(None, help="TOML file with the run's \\[llm.NAME] sections."),
) -> None:
    """Measure a run's noise floor: rerun its instances K times with its configuration (model and judge live,
    the web replayed where the run recorded it), re-judge its answers K times; per-instance flip rates, the
    headline's spread, the minimum detectable difference, judge vs agent churn, in DIR/noise.json (which
    `harness compare` uses). Run flags that run.json keeps only by hash (--website, --prompt-template) go
    after --."""
    from harness.report.noise import noise_lines
    from harness.runner.noise import noise

    try:
        figures = noise(output_dir, reruns, limit=limit, config_file=config, extra=list(ctx.args), log=log)
    except HarnessError as exc:
        fail(exc)
    stdout = Console()
    for line in noise_lines(figures):
        say(stdout, line)
    log(f"wrote {output_dir / 'noise.json'}")


@app.command("export")
def export_cmd(
    output_dir: Path = typer.Argument(..., help="A run's output directory."),
    fmt: str = typer.Option(..., "--format", help="A benchmark's own (a leaderboard's submission: gaia, a JSON Lines "
                                                  "file, and the others `harness benchmarks` lists), inspect (an "
                                                  "Inspect AI eval log, .json), jsonl (the rows flattened) or atif "
                                                  "(one ATIF trajectory per trial, into a folder)."),
    out: Path = typer.Option(..., "--out", help="The file to write (replaced atomically); for a folder format (atif, "
                                                "a benchmark's) a new or empty folder (atif: "
                                                "TRIAL/agent/trajectory.json in it)."),
    allow_missing: bool = typer.Option(False, "--allow-missing", help="gaia: write the submission even though "
                                                                      "some selected tasks have no row."),
    allow_partial: bool = typer.Option(False, "--allow-partial", help="gaia: write the submission of a run of part "
                                                                      "of its split (--limit, --level, ...)."),
    allow_hard_judge: bool = typer.Option(False, "--allow-hard-judge", help="ARE's leaderboard folder: export a run "
                                          "judged by ARE's scripted checks alone (no --judge-model: message texts "
                                          "not compared)."),
    allow_few_epochs: bool = typer.Option(False, "--allow-few-epochs", help="ARE's leaderboard folder: export a run "
                                          "of fewer epochs than the leaderboard's 3 runs per scenario."),
) -> None:
    """Write a run in another tool's format. Exit 2 (nothing written) when the file would not be valid."""
    from harness.export import export

    try:
        warnings = export(output_dir, fmt, out, allow_missing=allow_missing, allow_partial=allow_partial,
                          allow_hard_judge=allow_hard_judge, allow_few_epochs=allow_few_epochs)
    except HarnessError as exc:
        fail(exc)
    for warning in warnings:
        say(console, warning, style="yellow")
    log(f"wrote {out} ({fmt})")


@app.command("view")
def view_cmd(
    output_dirs: list[Path] | None = typer.Argument(None, help="Run directories, or folders of runs (watched: a run "
                                                                  "started there appears; a path not there yet is "
                                                                  "waited for). Default: the folder ./runs."),
    port: int = typer.Option(8765, help="Port on 127.0.0.1 (0: any free port)."),
    compare: bool = typer.Option(False, "--compare", help="Compare with the first run from the start, runs of another "
                                                          "dataset or selection too (else: a choice in the page)."),
) -> None:
    """Browse runs in a local web app on 127.0.0.1, live while a run writes: running instances and
    their traces, accuracy so far over the finished ones. Several run directories named: the
    first is the baseline of the others; a folder of runs is listed without comparing."""
    import time

    from harness.report.view import ViewServer, is_run_dir

    sources = list(output_dirs or [Path("runs")])
    for d in sources:
        if d.exists() and not d.is_dir():
            fail(InputError(f"{d} is not a directory"))
    named = sum(1 for d in sources if is_run_dir(d)) > 1
    try:
        server = ViewServer(sources, port, compare=compare or named, force=compare).start()
    except OSError as exc:
        fail(InputError(f"cannot listen on 127.0.0.1:{port}: {exc}"))
    log(f"harness view: {server.url} (Ctrl-C stops)")
    for d in sources:
        if not d.exists():
            log(f"waiting for {d} to appear")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()
