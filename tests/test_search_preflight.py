"""The search provider's preflight (environments/websearch/probe.py): one real search before any container,
against each provider's fake server (tests/fakes/search_servers.py) and small servers that trickle or
answer something else; and a provider that trickles its answer is cut at the request's timeout."""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from harness.environments.websearch.env import SearchUnavailable, WebSearch
from harness.environments.websearch.probe import PROBE_QUERY, probe_search
from harness.environments.websearch.settings import SearchSettings
from harness.errors import InputError
from harness.traces import Tracer
from tests.fakes.search_servers import FakeSearch
from tests.helpers.e2e import explain, harness, replay_dataset

PROVIDERS = ("tavily", "serper", "brave", "searxng")


def settings(provider: str, base_url: str, monkeypatch, key: str = "test-key", **extra) -> SearchSettings:
    monkeypatch.setenv("TEST_SEARCH_KEY", key)
    return SearchSettings(provider=provider, base_url=base_url,
                          api_key_env=None if provider == "searxng" else "TEST_SEARCH_KEY", **extra)


class Odd:
    """A server on 127.0.0.1 answering every request with 200: `trickle` sends a byte every 0.2 s without
    end (each read well within any timeout); else `body` as text/html."""

    def __init__(self, *, trickle: bool = False, body: bytes = b"<html>a login page</html>"):
        odd = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _serve(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                odd.requests += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/json" if trickle else "text/html")
                self.send_header("Content-Length", str(10_000_000 if trickle else len(body)))
                self.end_headers()
                if not trickle:
                    self.wfile.write(body)
                    return
                while not odd.stopped.is_set():
                    try:
                        self.wfile.write(b" ")
                        self.wfile.flush()
                    except OSError:
                        return
                    odd.stopped.wait(0.2)

            do_GET = do_POST = _serve  # noqa: N815

        self.requests, self.stopped = 0, threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Odd:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        self.server.shutdown()
        self.server.server_close()


def within(seconds: float, fn):
    """fn() run in a thread; what it returned or raised, or a failure when it has not ended in `seconds`."""
    done: dict = {}

    def work():
        try:
            done["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed back
            done["error"] = exc

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still running after {seconds} s"
    if "error" in done:
        raise done["error"]
    return done["value"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_preflight_makes_one_marked_search_and_passes_a_working_provider(provider, monkeypatch):
    with FakeSearch(provider) as server:
        assert probe_search(settings(provider, server.base_url, monkeypatch)) is None
    (request,) = server.requests
    assert request["headers"]["x-harness-preflight"] == "1"
    asked = (request["json"] or {}).get("query") or (request["json"] or {}).get("q") or request["query"].get("q")
    assert asked == PROBE_QUERY


@pytest.mark.parametrize("provider", ["tavily", "serper", "brave"])
def test_a_refused_key_is_exit_2_naming_the_provider_and_the_variable(provider, monkeypatch):
    with FakeSearch(provider, key="right") as server, pytest.raises(InputError) as caught:
        probe_search(settings(provider, server.base_url, monkeypatch, key="wrong"))
    assert str(caught.value).startswith(f"--search {provider} ({server.base_url}) refused the key from TEST_SEARCH_KEY")
    assert len(server.requests) == 1  # never retried


@pytest.mark.parametrize(("script", "expect"), [
    (("query",), "refused the preflight's search (check its base_url and options): HTTP 400"),
    (("status", 402), "the key's quota is used up: HTTP 402"),
    (("status", 404), "refused the preflight's search"),
])
def test_a_provider_that_cannot_work_for_any_instance_is_exit_2(script, expect, monkeypatch):
    with FakeSearch("tavily", key="test-key", script=[script]) as server, pytest.raises(InputError) as caught:
        probe_search(settings("tavily", server.base_url, monkeypatch))
    assert expect in str(caught.value), caught.value


@pytest.mark.parametrize("status", [429, 503])
def test_a_busy_or_failing_provider_is_a_warning(status, monkeypatch):
    with FakeSearch("serper", script=[("status", status)]) as server:
        warning = probe_search(settings("serper", server.base_url, monkeypatch))
    assert warning is not None and warning.startswith(f"warning: --search serper ({server.base_url}) is busy")
    assert f"HTTP {status}" in warning and len(server.requests) == 1


def test_no_answer_an_answer_that_is_not_json_or_one_without_end_is_exit_2(monkeypatch):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    with pytest.raises(InputError, match=r"^--search searxng \(http://127.0.0.1:\d+\): the search preflight got no "
                                         r"answer: ConnectError"):
        probe_search(settings("searxng", f"http://127.0.0.1:{port}", monkeypatch))
    with Odd() as page, pytest.raises(InputError, match="the preflight's answer is not searxng's JSON: '<html>a login"):
        probe_search(settings("searxng", page.base_url, monkeypatch))
    with Odd(trickle=True) as trickling, pytest.raises(InputError, match="was still coming after 1 s"):
        within(15, lambda: probe_search(settings("searxng", trickling.base_url, monkeypatch, timeout=1.0)))


def test_nothing_is_asked_of_an_offline_none_or_replayed_search(monkeypatch):
    with FakeSearch("tavily") as server:
        for given in (SearchSettings(provider="none"), SearchSettings(provider="site", base_url=server.base_url),
                      settings("tavily", server.base_url, monkeypatch, web_replay=("/nowhere/search.warc.gz",))):
            assert probe_search(given) is None
    assert server.requests == []


def test_a_search_whose_answer_trickles_is_cut_at_its_timeout_an_outage(tmp_path, monkeypatch):
    """Before, each byte arriving within the read timeout kept the search reading up to MAX_ANSWER_BYTES
    (8 MB at a byte per 0.2 s: about 19 days); now a request takes its timeout in all, then is retried."""
    with Odd(trickle=True) as trickling:
        search = WebSearch(settings("searxng", trickling.base_url, monkeypatch, timeout=1.0, max_retries=1,
                                    backoff=0.01), Tracer(tmp_path / "t.jsonl"))
        started = time.monotonic()
        with pytest.raises(SearchUnavailable, match="was still coming after 1 s"):
            within(20, lambda: search.search("teak"))
        assert trickling.requests == 2 and time.monotonic() - started < 20


def test_a_run_with_a_refused_search_key_ends_at_the_preflight_before_any_container(tmp_path):
    data, config = replay_dataset(tmp_path / "data", [("q", "Where?", "here")],
                                  lambda iid: [{"content": "<solution>here</solution>"}])
    with FakeSearch("brave", key="right") as server:
        config.write_text(config.read_text() + f'[search.brave]\nbase_url = "{server.base_url}"\n'
                                               'api_key_env = "TEST_BRAVE_KEY"\n')
        proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--search", "brave",
                       "--output-dir", tmp_path / "out", env={"TEST_BRAVE_KEY": "wrong"})
    assert proc.returncode == 2, explain(proc)
    said = f"--search brave ({server.base_url}) refused the key from TEST_BRAVE_KEY: HTTP 422"
    assert said in proc.stderr, proc.stderr
    assert "SUBSCRIPTION_TOKEN_INVALID" in proc.stderr or "subscription token is invalid" in proc.stderr
    out = tmp_path / "out"
    assert not out.exists() or list(out.iterdir()) == [], list(out.iterdir())  # no row, no run.json
    assert len(server.requests) == 1
