"""An in-sandbox agent's big model requests and replies pass the relay whole (issue 29 item 4: a request
over ~0.75 MiB failed, the relay read requests from an exec's stdout, capped at 1 MiB: a 2 MB request
was an `agent` error `JSONDecodeError ... char 1048576`).

A real `--agent sandbox:` run: a program of the test's own (stdlib only) sends a ~2 MB and a ~20 MB
request through the relay to the scripted OpenAI-compatible server (tests/fakes/openai_server.py),
which answers the first with a ~2 MB reply; then one request just over the relay's stated limit
(MAX_REQUEST_BYTES, 64 MiB), which the relay refuses with a 413 saying so. The server must get each
accepted request's text whole (its sha256), the program each reply whole.
"""

from __future__ import annotations

import hashlib
import json
import time

import pytest

from harness.agents.sandboxed.relay import MAX_REQUEST_BYTES
from tests.fakes.openai_server import FakeOpenAI, text
from tests.helpers.e2e import containers_of, explain, fake_config, harness, out_dir, remove_leftovers, rows

SIZES = (2_000_000, 20_000_000)
REPLY = 2_000_000  # characters of the first reply
OVER = MAX_REQUEST_BYTES + 1  # the body's bytes of the last request: just over the relay's limit

AGENT = r'''
import hashlib, json, os, sys, urllib.error, urllib.request

def filler(size, seed):
    return "".join(hashlib.sha256(f"{seed}-{i}".encode()).hexdigest() for i in range(size // 64 + 1))[:size]

def ask(content):
    body = json.dumps({"model": os.environ["HARNESS_MODEL"], "messages": [{"role": "user", "content": content}]})
    request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body.encode(),
                                     headers={"Content-Type": "application/json",
                                              "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            reply = json.load(response)["choices"][0]["message"]["content"]
            return {"status": 200, "chars": len(reply), "sha256": hashlib.sha256(reply.encode()).hexdigest()}
    except urllib.error.HTTPError as exc:
        return {"status": exc.code, "body": exc.read().decode(errors="replace")}

sizes, over = [int(s) for s in sys.argv[1].split(",")], int(sys.argv[2])
got = [ask(filler(size, size)) for size in sizes]
padding = over - len(json.dumps({"model": os.environ["HARNESS_MODEL"], "messages": [{"role": "user", "content": ""}]}))
got.append(ask("y" * padding))
print("<solution>" + json.dumps(got) + "</solution>")
'''


def filler(size: int, seed: int) -> str:
    return "".join(hashlib.sha256(f"{seed}-{i}".encode()).hexdigest() for i in range(size // 64 + 1))[:size]


def sha(text_: str) -> str:
    return hashlib.sha256(text_.encode()).hexdigest()


@pytest.mark.docker
def test_requests_and_replies_far_over_an_execs_output_pass_the_relay_whole(tmp_path, image, reliability):
    program = tmp_path / "big_agent.py"
    program.write_text(AGENT)
    data = tmp_path / "tasks.jsonl"
    data.write_text(json.dumps({"instance_id": "big-requests", "question": "Send big requests.", "answer": "-"}) + "\n")
    out = out_dir(tmp_path)
    reply = filler(REPLY, 7)
    t0 = time.monotonic()
    try:
        with FakeOpenAI([text(reply), text("second")]) as server:
            config = fake_config(tmp_path / "models.toml", server.base_url, timeout=300)
            proc = harness("run", "--dataset", data, "--model", "fake", "--config", config, "--output-dir", out,
                           "--agent", f"sandbox:python3 @{program} {','.join(map(str, SIZES))} {OVER}",
                           "--instance-timeout", 300, timeout=500)
            received = [next(m["content"] for m in r["json"]["messages"] if m["role"] == "user")
                        for r in server.chat_requests]
        (row,) = rows(out)
        seconds = time.monotonic() - t0
        assert proc.returncode == 0 and row["status"] == "ok", (row.get("error"), explain(proc))
        got = json.loads(row["answer"])
        reliability.record("an in-sandbox agent's 2 MB and 20 MB requests, a 2 MB reply, a 64 MiB + 1 B request",
                           f"server got {[len(r) for r in received]} chars whole; the program got replies of "
                           f"{[g.get('chars') for g in got[:2]]} chars; over the limit: {got[2]['status']}",
                           lost=0, leaked=len(containers_of(out)), seconds=seconds)
        assert [len(r) for r in received] == list(SIZES)  # the request over the limit never reached the server
        assert [sha(r) for r in received] == [sha(filler(size, size)) for size in SIZES]
        assert got[0] == {"status": 200, "chars": REPLY, "sha256": sha(reply)}
        assert got[1]["status"] == 200 and got[1]["chars"] == len("second")
        refused = got[2]
        assert refused["status"] == 413, refused
        message = json.loads(refused["body"])["error"]["message"]
        assert f"{OVER} bytes" in message and "64 MiB" in message, message
    finally:
        assert remove_leftovers(out) == []
