"""A base URL that is not a model server (issue 29 item 18): one that answered 501 or 505, or an HTML
page with a 5xx, passed the preflight as a warning, then cost each instance a sandbox and a failed
model call. Now: exit 2 before any container, naming the section, the status and the page's words
with the HTML stripped.

The server is the scripted fake (tests/fakes/openai_server.py) answering the probe with Python's
http.server error page (what `python3 -m http.server` answers a POST) or an nginx-like gateway page;
the run is the real CLI with the AutoGen and the plain runner.
"""

from __future__ import annotations

import json
import time

import pytest

from harness import exit_codes
from tests.fakes.openai_server import FakeOpenAI, raw
from tests.helpers.e2e import containers_created_between, explain, fake_config, harness, out_dir

STDLIB = ("<!DOCTYPE HTML><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Error response</title>"
          "<style>body {color: red}</style></head><body><h1>Error response</h1><p>Error code: {status}</p>"
          "<p>Message: Unsupported method (&#x27;POST&#x27;).</p></body></html>")
GATEWAY = ("<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1>"
           "</center>\r\n<hr><center>nginx</center>\r\n<script>var x = '<b>';</script></body>\r\n</html>\r\n")
CASES = {"501 page": (501, STDLIB, "Message: Unsupported method ('POST')"),
         "505 page": (505, STDLIB, "Message: Unsupported method ('POST')"),
         "501 json": (501, json.dumps({"error": {"message": "not implemented"}}), "not implemented"),
         "502 html": (502, GATEWAY, "502 Bad Gateway 502 Bad Gateway nginx")}


@pytest.mark.docker
@pytest.mark.parametrize("agent, case", [("plain", case) for case in sorted(CASES)] + [
    # The AutoGen runner's preflight is the same call: one page in the default run, the rest slow.
    pytest.param("assistant", case, marks=() if case == "502 html" else pytest.mark.slow) for case in sorted(CASES)])
def test_a_base_url_that_is_not_a_model_server_exits_2_before_any_container(tmp_path, reliability, agent, case):
    status, page, words = CASES[case]
    page = page.replace("{status}", str(status))
    iid = f"notmodel-{out_dir(tmp_path).name}"
    data = tmp_path / "tasks.jsonl"
    data.write_text(json.dumps({"instance_id": iid, "question": "What is 6*7?", "answer": "42"}) + "\n")
    out = out_dir(tmp_path)
    content_type = "application/json" if "json" in case else "text/html;charset=utf-8"
    with FakeOpenAI([], probe=raw(page, status, content_type)) as server:
        config = fake_config(tmp_path / "models.toml", server.base_url)
        since, t0 = time.time(), time.monotonic()
        proc = harness("run", "--dataset", data, "--model", "fake", "--config", config, "--output-dir", out,
                       "--agent", agent, timeout=180)
        seconds = time.monotonic() - t0
        asked = len(server.chat_requests)
    created = containers_created_between(iid, since, time.time())
    reliability.record(f"base URL not a model server: {case} ({agent} agent)",
                       f"exit {proc.returncode} before any container, status and page words named",
                       leaked=len(created), seconds=seconds)
    assert proc.returncode == exit_codes.INPUT, explain(proc)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, explain(proc)
    assert "--model fake [llm.fake]" in errors[0] and f"with {status} " in errors[0], errors
    assert words in errors[0] and "not an OpenAI-compatible model server" in errors[0], errors
    assert "<" not in errors[0].split(f"with {status} ", 1)[1], errors  # the tags stripped
    assert created == [] and asked == 0 and not (out / "output.jsonl").exists()
