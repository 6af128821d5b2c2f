"""fetch_url, transcribe_audio and video_frames (issue 23 items 2 and 5) in real sandboxes.

fetch_url GETs from inside the sandbox (the offline site on its network; nothing without one);
transcribe_audio sends a real WAV to the fake OpenAI server's multipart /v1/audio/transcriptions
through the official client; video_frames runs the image's ffmpeg on a clip ffmpeg made. Both
runners (plain and AutoGen) offer the tools, in their preflight request and in a real run.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import struct
import wave
from pathlib import Path

import pytest

from harness.agents.contract import Limits
from harness.agents.dry import dry_environments
from harness.environments.audio import AudioEnv
from harness.environments.fetch import FetchEnv
from harness.environments.files import FileEnv
from harness.environments.tools import sandbox_tools
from harness.environments.video import MAX_FRAMES, VideoEnv
from harness.environments.websearch.guard import Guard
from harness.models.config import ModelSection
from harness.sandbox.contract import SandboxSpec
from harness.traces import Tracer, read_trace
from harness.traces.forensics import read_facts
from tests.fakes.openai_server import FakeOpenAI, error, text, tool_calls
from tests.helpers.e2e import FAKE_KEY, FAKE_KEY_ENV, explain, fake_config, harness, rows, trace

SMOKE = Path(__file__).resolve().parents[1] / "datasets" / "gaia-smoke"
SITE = "http://shop.gaia.test"


def tone_wav(seconds: float = 0.5, rate: int = 8000) -> bytes:
    """A real WAV file: a 440 Hz sine, 16-bit mono."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(b"".join(struct.pack("<h", int(12000 * math.sin(2 * math.pi * 440 * i / rate)))
                                 for i in range(int(seconds * rate))))
    return buffer.getvalue()


def section(base_url: str, transcription_model: str | None = "whisper-1") -> ModelSection:
    return ModelSection(name="fake", model="fake-model-1", base_url=base_url, api_key_env=FAKE_KEY_ENV,
                        max_retries=0, timeout=20, transcription_model=transcription_model)


def media_tools(envs) -> list[str]:
    return [t.__name__ for t in sandbox_tools(envs) if t.__name__ in ("fetch_url", "video_frames", "transcribe_audio")]


def test_transcribe_audio_is_offered_only_with_a_transcription_model():
    limits = Limits()
    assert media_tools(dry_environments(limits)) == ["fetch_url", "video_frames"]
    assert "transcribe_audio" not in media_tools(dry_environments(limits, section("http://127.0.0.1:9/v1", None)))
    assert media_tools(dry_environments(limits, section("http://127.0.0.1:9/v1"))) == [
        "fetch_url", "video_frames", "transcribe_audio"]


def test_a_transcription_model_is_fingerprinted_only_when_set():
    """Runs made before the key existed resume unchanged (tests/test_run_configuration.py's old run.json);
    a run with one records it, so changing it is a changed setting on resume."""
    assert "transcription_model" not in section("http://h/v1", None).public()
    assert section("http://h/v1").public()["transcription_model"] == "whisper-1"


@pytest.mark.parametrize("provider", ["anthropic", "gemini", "azure"])
def test_a_transcription_model_on_a_provider_without_the_api_is_refused_at_load(provider, tmp_path):
    """Exit 2 naming the section, before any container; a transcription_base_url makes it valid."""
    azure = 'azure_endpoint = "https://x.openai.azure.com"\napi_version = "2024-10-21"\n' if provider == "azure" else ""
    config = tmp_path / "m.toml"
    config.write_text(f'[llm.talk]\nprovider = "{provider}"\nmodel = "m-1"\napi_key_env = "{FAKE_KEY_ENV}"\n'
                      f'{azure}transcription_model = "whisper-1"\n')
    proc = harness("run", "--dataset", SMOKE, "--model", "talk", "--config", config, "--output-dir",
                   tmp_path / "out", env={FAKE_KEY_ENV: FAKE_KEY})
    assert proc.returncode == 2, explain(proc)
    assert f"[llm.talk] in the config: value: transcription_model: provider {provider!r}" in proc.stderr, proc.stderr
    assert "transcription_base_url" in proc.stderr and "Traceback" not in proc.stderr
    from harness.models.config import parse_section

    raw = {"provider": provider, "model": "m-1", "transcription_model": "whisper-1",
           "transcription_base_url": "http://127.0.0.1:9/v1",
           **({"azure_endpoint": "https://x.openai.azure.com", "api_version": "2024-10-21"} if provider == "azure"
              else {})}
    assert parse_section({"llm": {"talk": raw}}, "talk").transcription_base_url == "http://127.0.0.1:9/v1"


@pytest.mark.parametrize(("raw", "expect"), [
    ({"transcription_base_url": "http://h/v1"}, "transcription_base_url: only with a transcription_model"),
    ({"transcription_model": "w", "transcription_api_key_env": "K"}, "only with a transcription_base_url"),
    # no http(s) URL: every transcribe_audio call failed in the run instead
    ({"transcription_model": "w", "transcription_base_url": "whisper.local"}, "transcription_base_url: expected http"),
    ({"transcription_model": "w", "transcription_base_url": ""}, "transcription_base_url: expected http"),
])
def test_the_transcription_keys_are_refused_where_they_would_be_ignored(raw, expect):
    from harness.errors import InputError
    from harness.models.config import parse_section

    with pytest.raises(InputError, match=expect):
        parse_section({"llm": {"m": {"model": "m-1", **raw}}}, "m")


@pytest.mark.parametrize("keyed", [True, False])
def test_transcriptions_go_to_their_own_server_with_their_own_key(keyed, monkeypatch):
    """An anthropic section's transcribe_audio: the official client posts to transcription_base_url with
    the key of transcription_api_key_env (none when unset), never the section's own key."""
    monkeypatch.setenv("TEST_CLAUDE_KEY", "sk-ant-section-key")
    monkeypatch.setenv("TEST_WHISPER_KEY", "sk-whisper-key")
    with FakeOpenAI([], transcript="a quick brown fox") as server:
        talk = ModelSection(name="claude", provider="anthropic", model="claude-x", api_key_env="TEST_CLAUDE_KEY",
                            transcription_model="whisper-1", transcription_base_url=server.base_url,
                            transcription_api_key_env="TEST_WHISPER_KEY" if keyed else None, max_retries=0)
        reply = AudioEnv(None, talk).client().audio.transcriptions.create(  # type: ignore[arg-type]
            model="whisper-1", file=("tone.wav", tone_wav()))
    assert reply.text == "a quick brown fox"
    (sent,) = [r for r in server.requests if r["path"] == "/v1/audio/transcriptions"]
    assert sent["headers"]["authorization"] == ("Bearer sk-whisper-key" if keyed else "Bearer not-needed")
    assert server.transcriptions[0]["file"] == tone_wav()


@pytest.mark.docker
def test_fetch_url_reads_the_offline_site_inside_the_sandbox(provider, image, run_id, tmp_path):
    trace_path = tmp_path / "t.jsonl"
    with provider.website(SMOKE / "website", image, run_id) as policy, \
            provider.open(SandboxSpec(image=image, run_id=run_id, instance_id="fetch", network=policy)) as sb:
        files = FileEnv(sb, Tracer(trace_path), page_size=400)
        fetch = FetchEnv(files, timeout=4)
        about = fetch.fetch(f"{SITE}/about")
        csv = fetch.fetch(f"{SITE}/files/supplier-deliveries-2023.csv")
        saved = about.split("saved as ")[1].split(";")[0]
        page2 = files.read(saved[len("/workspace/"):], page=2)
        on_disk = sb.shell(f"head -c 300 {saved}").stdout
        missing = fetch.fetch(f"{SITE}/no-such-page")
        slow = fetch.fetch(f"{SITE}/slow")
        nowhere = fetch.fetch("http://nowhere.gaia.test/")
        local = fetch.fetch("file:///etc/passwd")
        big = FetchEnv(files, max_bytes=200).fetch(f"{SITE}/catalog")
        leftovers = sb.shell("ls /workspace/fetched").stdout.split()
    assert about.startswith(f"Fetched {SITE}/about: HTTP 200, text/html,"), about[:300]
    assert "/workspace/fetched/" in saved and saved.endswith(".html")
    assert "[fetched/" in about and "page 1 of " in about and "Founded in 1987" in about + page2
    assert "<html" in on_disk.lower()  # the raw response is in the workspace; the model read markdown
    assert "date" in csv and "supplier" in csv and "text/csv" in csv
    assert missing.startswith("Error: HTTP 404"), missing
    assert slow.startswith("Error: timeout"), slow
    assert nowhere.startswith("Error: ") and "nowhere.gaia.test" in nowhere, nowhere
    assert local.startswith("Error: only http:// and https://"), local
    assert big.startswith("Error: too big"), big
    assert len(leftovers) == 2, leftovers  # the two fetched files; nothing of the refused ones
    assert read_facts(trace_path).env_outcomes["fetch"] == {"ok": 2, "error": 4, "timeout": 1}


LOOPBACK_SITE = r"""
import http.server, time
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open("/tmp/hits", "a") as log:
            log.write(self.path + "\n")
        if self.path == "/stream":  # a body sent slowly (about 2 s), so that parallel fetches of it overlap
            body = b"".join(b"line %06d\n" % i for i in range(40000))
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            for start in range(0, len(body), 12000):
                self.wfile.write(body[start:start + 12000])
                time.sleep(0.05)
            return
        if self.path == "/page":  # a link the browser downloads (served as an attachment)
            return self._send(b'<html><body><a href="/answers/file.csv">the file</a></body></html>', "text/html")
        if self.path.startswith("/answers/"):
            return self._send(b"q,a\n1,42\n", "text/csv", {"Content-Disposition": 'attachment; filename="file.csv"'})
        moves = {"/go": "/answers", "/hop": "/ok", "/chain": "/secret/hop", "/secret/hop": "/ok"}
        if self.path in moves:
            self.send_response(302)
            self.send_header("Location", moves[self.path])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self._send(b"the answer is 42", "text/plain")
    def _send(self, body, ctype, headers={}):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)
http.server.ThreadingHTTPServer(("127.0.0.1", 47123), Handler).serve_forever()
"""


def start_loopback_site(sb) -> None:
    """LOOPBACK_SITE served on the sandbox's own 127.0.0.1:47123 (its network is none), once it answers."""
    sb.shell(f"cat > /tmp/site.py <<'EOF'\n{LOOPBACK_SITE}\nEOF\n"
             "setsid python3 /tmp/site.py >/dev/null 2>&1 < /dev/null &")
    probe = "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 47123), 1)' 2>/dev/null"
    up = sb.shell(f"for i in $(seq 200); do {probe} && exit 0; sleep 0.1; done; exit 1", timeout=60)
    assert up.ok, "the loopback site did not start within 20 s"


@pytest.mark.docker
def test_fetch_url_keeps_to_the_leakage_guard_and_names_a_refused_connection(media_sandbox, tmp_path):
    """A blocked URL is never requested, nor a redirect's hop onto one (outcome blocked, a guard
    event each); a redirect elsewhere is named; a closed port is 'connection refused'. The site is a
    server on the sandbox's own loopback (its network is none)."""
    sb, trace_path = media_sandbox, tmp_path / "t.jsonl"
    start_loopback_site(sb)
    fetch = FetchEnv(FileEnv(sb, Tracer(trace_path)), guard=Guard(("127.0.0.1/answers",)))
    direct = fetch.fetch("http://127.0.0.1:47123/answers")
    redirected = fetch.fetch("http://127.0.0.1:47123/go")
    hop = fetch.fetch("http://127.0.0.1:47123/hop")
    refused = fetch.fetch("http://127.0.0.1:9/")
    hits = sb.shell("cat /tmp/hits").stdout.split()
    kept = sb.shell("ls /workspace/fetched").stdout.split()
    assert direct.startswith("Error: http://127.0.0.1:47123/answers is blocked by the leakage guard"), direct
    assert redirected.startswith("Error: http://127.0.0.1:47123/answers is blocked"), redirected
    assert "the answer is 42" not in direct + redirected
    assert hop.startswith("Fetched http://127.0.0.1:47123/hop (redirected to http://127.0.0.1:47123/ok)"), hop
    assert "the answer is 42" in hop and len(kept) == 1 and kept[0].endswith("-ok.txt"), kept
    assert hits == ["/go", "/hop", "/ok"]  # neither blocked URL was requested
    assert refused == "Error: connection refused by http://127.0.0.1:9/", refused
    events = read_trace(trace_path)
    assert [e.args["source"] for e in events if e.env == "guard"] == ["fetch", "fetch"]
    assert read_facts(trace_path).env_outcomes["fetch"] == {"blocked": 2, "ok": 1, "error": 1}


@pytest.mark.docker
def test_parallel_fetches_of_one_url_each_get_the_whole_file(media_sandbox, tmp_path):
    """Two fetch_url calls of the same URL at once (an AutoGen reply's parallel tool calls run in threads)
    both succeed with the whole body. Before, both wrote the same `.part` file: the second's rename found
    it gone (a traceback, read as an error) and the first could read a file the second was still writing."""
    from concurrent.futures import ThreadPoolExecutor

    sb = media_sandbox
    start_loopback_site(sb)
    fetch = FetchEnv(FileEnv(sb, Tracer(tmp_path / "t.jsonl")))
    with ThreadPoolExecutor(2) as pool:
        replies = list(pool.map(fetch.fetch, ["http://127.0.0.1:47123/stream"] * 2))
    assert all(r.startswith("Fetched http://127.0.0.1:47123/stream: HTTP 200, text/plain, 480000 bytes")
               for r in replies), [r[:300] for r in replies]
    assert all("line 000000" in r for r in replies)
    kept = sb.shell("ls -a /workspace/fetched; md5sum /workspace/fetched/*").stdout.split()
    expected = hashlib.md5(b"".join(b"line %06d\n" % i for i in range(40000))).hexdigest()
    assert [name for name in kept if name.endswith(".part")] == [] and kept.count(expected) == 1, kept


@pytest.mark.docker
def test_download_file_keeps_to_the_leakage_guard_after_a_redirect(media_sandbox, tmp_path):
    """download_file of a URL that redirects onto a blocked one keeps nothing (before: the file was kept and
    its path shown; only the URL asked for was checked), as fetch_url does; a redirect elsewhere downloads;
    nor does a click that the browser turns into a download of a blocked URL (before: kept, unchecked)."""
    import asyncio

    from harness.environments.web import WebEnv

    sb, trace_path = media_sandbox, tmp_path / "t.jsonl"
    start_loopback_site(sb)

    async def downloads():
        web = WebEnv(sb, Tracer(trace_path), action_timeout=30)
        web.guard = Guard(("127.0.0.1/answers",))
        try:
            return (await web.download("http://127.0.0.1:47123/go"), await web.download("http://127.0.0.1:47123/hop"),
                    await web.visit("http://127.0.0.1:47123/page"), await web.click("the file"))
        finally:
            await web.close()

    redirected, hop, _, clicked = asyncio.run(downloads())
    kept = sb.shell("ls /workspace/downloads").stdout.split()
    assert redirected.startswith("Error: http://127.0.0.1:47123/answers is blocked by the leakage guard"), redirected
    assert hop.startswith("Downloaded http://127.0.0.1:47123/hop to /workspace/downloads/"), hop
    # a click the browser turns into a download of a blocked URL keeps nothing either
    assert clicked.startswith("Error: http://127.0.0.1:47123/answers/file.csv is blocked by the leakage"), clicked
    assert kept == ["hop"], kept
    events = read_trace(trace_path)
    assert [(e.args["url"], e.args["source"]) for e in events if e.env == "guard"] == [
        ("http://127.0.0.1:47123/answers", "browser"), ("http://127.0.0.1:47123/answers/file.csv", "browser")]
    assert [e.outcome for e in events if e.env == "web"] == ["blocked", "ok", "ok", "blocked"]


@pytest.fixture
def media_sandbox(provider, image, run_id, tmp_path):
    (tmp_path / "tone.wav").write_bytes(tone_wav())
    with provider.open(SandboxSpec(image=image, run_id=run_id, instance_id="media")) as sb:
        sb.copy_in(tmp_path, ["tone.wav"])
        made = sb.shell("ffmpeg -nostdin -v error -f lavfi -i testsrc=duration=5:size=320x240:rate=10 "
                        "-pix_fmt yuv420p clip.mp4", timeout=120)
        assert made.ok, made.stderr
        yield sb


@pytest.mark.docker
def test_transcribe_audio_sends_the_workspace_file_from_the_host(media_sandbox, tmp_path, monkeypatch):
    monkeypatch.setenv(FAKE_KEY_ENV, FAKE_KEY)
    trace_path = tmp_path / "t.jsonl"
    files = FileEnv(media_sandbox, Tracer(trace_path))
    with FakeOpenAI([], transcript="the quick brown fox") as server:
        out = AudioEnv(files, section(server.base_url)).transcribe("tone.wav")
        outside = AudioEnv(files, section(server.base_url)).transcribe("../etc/passwd")
        big = AudioEnv(files, section(server.base_url), max_bytes=100).transcribe("tone.wav")
        sent = list(server.transcriptions)
    with FakeOpenAI([], transcript=error(400, {"error": {"message": "Invalid file format.",
                                                         "type": "invalid_request_error"}})) as refusing:
        refused = AudioEnv(files, section(refusing.base_url)).transcribe("tone.wav")
    saved = media_sandbox.shell("cat /workspace/transcripts/tone.wav.txt").stdout
    assert out.startswith("Transcript of tone.wav by whisper-1, saved as /workspace/transcripts/tone.wav.txt")
    assert "the quick brown fox" in out and saved == "the quick brown fox"
    (request,) = sent  # only the good call reached the server
    assert request["file"] == tone_wav() and request["filename"] == "tone.wav" and request["model"] == "whisper-1"
    (entry,) = [r for r in server.requests if r["path"] == "/v1/audio/transcriptions"]
    assert entry["headers"]["authorization"] == f"Bearer {FAKE_KEY}"
    assert entry["headers"]["content-type"].startswith("multipart/form-data")
    assert outside.startswith("Error: ") and "outside /workspace" in outside
    assert big.startswith("Error: too big")
    assert refused.startswith("Error: the transcription server answered 400") and "Invalid file format" in refused
    outcomes = read_facts(trace_path).env_outcomes["audio"]
    assert outcomes == {"ok": 1, "error": 3}


@pytest.mark.docker
def test_video_frames_are_extracted_inside_the_sandbox(media_sandbox, tmp_path):
    trace_path = tmp_path / "t.jsonl"
    video = VideoEnv(media_sandbox, Tracer(trace_path))
    out = video.frames("clip.mp4", 1)
    dense = video.frames("clip.mp4", 0.1)
    not_video = video.frames("tone.wav", 1)
    zero = video.frames("clip.mp4", 0)
    missing = video.frames("nope.mp4", 1)
    paths = [line.split(" ", 1)[1] for line in out.splitlines()[1:]]
    first = media_sandbox.read_file(paths[0])
    size = media_sandbox.shell(f"python3 -c \"from PIL import Image; print(Image.open('{paths[0]}').size)\"").stdout
    # no fetch without a network: the sandbox's own policy answers
    no_net = FetchEnv(FileEnv(media_sandbox, Tracer(None)), timeout=5).fetch("http://example.com/")
    assert out.startswith("5 frames of clip.mp4, one every 1 s (the video is 5 s long)"), out
    assert out.splitlines()[1].startswith("t=0s /workspace/frames/clip.mp4-every-1s/frame-0001.png")
    assert len(paths) == 5 and first.startswith(b"\x89PNG") and size.strip() == "(320, 240)"
    assert dense.startswith(f"{MAX_FRAMES} frames") and f"stopped at {MAX_FRAMES} frames" in dense
    assert not_video.startswith("Error: cannot extract frames from 'tone.wav'"), not_video
    assert zero.startswith("Error: every_s must be at least")
    assert missing.startswith("Error: no such file")
    assert no_net.startswith("Error: "), no_net
    assert read_facts(trace_path).env_outcomes["video"] == {"ok": 2, "error": 3}


@pytest.mark.docker
@pytest.mark.parametrize("agent", ["plain", "assistant"])
def test_a_run_transcribes_an_attached_audio_file_and_the_key_stays_on_the_host(agent, tmp_path, image, out):
    """Both runners: the preflight offers transcribe_audio, and a run's model calls it; the real agent
    process sends the WAV from the host and the transcript reaches the model. Secret canary: the key
    the transcription was sent with is nowhere in the sandbox (as tests/faults/test_holds.py checks for
    chat calls)."""
    canary = "sk-canary-" + os.urandom(8).hex()
    look = ("env; cat /proc/1/environ /proc/self/environ 2>/dev/null | tr '\\0' '\\n'; "
            "grep -rsl " + canary[:14] + " /workspace /tmp /proc/*/environ 2>/dev/null; echo done")
    (tmp_path / "tone.wav").write_bytes(tone_wav())
    data = tmp_path / "tasks.jsonl"
    data.write_text(json.dumps({"instance_id": f"audio-{agent}", "question": "What is said in tone.wav?",
                                "answer": "fox", "files": ["tone.wav"]}) + "\n")
    script = [tool_calls(("transcribe_audio", {"path": "tone.wav"})), tool_calls(("run_shell", {"command": look})),
              text("It says <solution>fox</solution>")]
    with FakeOpenAI(script, transcript="a quick brown fox") as server:
        config = fake_config(tmp_path / "m.toml", server.base_url)
        config.write_text(config.read_text().replace("[llm.fake.model_info]",
                                                     'transcription_model = "whisper-1"\n[llm.fake.model_info]'))
        proc = harness("run", "--dataset", data, "--model", "fake", "--config", config, "--output-dir", out,
                       "--agent", agent, "--workers", 1, "--instance-timeout", 120, env={FAKE_KEY_ENV: canary})
    assert proc.returncode == 0, explain(proc)
    (row,) = rows(out)
    assert row["status"] == "ok" and row["correct"] is True, row
    assert row["tool_calls"] == ["transcribe_audio", "run_shell"]
    assert row["env_outcomes"]["audio"] == {"ok": 1}
    probe_tools = {t["function"]["name"] for t in server.probes[0]["json"]["tools"]}
    assert {"fetch_url", "video_frames", "transcribe_audio"} <= probe_tools
    assert server.transcriptions[0]["file"] == tone_wav()
    (sent,) = [r for r in server.requests if r["path"] == "/v1/audio/transcriptions"]
    assert sent["headers"]["authorization"] == f"Bearer {canary}"  # the key went to the provider
    tool_message = json.dumps(server.chat_requests[1]["json"]["messages"][-1])
    assert "a quick brown fox" in tool_message
    events = trace(out, row)
    (event,) = [e for e in events if e["type"] == "env" and e["env"] == "audio"]
    assert event["outcome"] == "ok" and event["model"] == "whisper-1" and event["bytes"] == len(tone_wav())
    shown = "\n".join(str(e.get("content", "")) for e in events if e["type"] == "tool_result")
    assert "done" in shown and canary not in shown and canary not in (out / row["trace"]).read_text()
