"""The smoke set's audio task transcribed for real and replayed (issue 23 item 7).

The memo (datasets/gaia-smoke, scripts/make_smoke_media.py) is sent by the real agent process to the
fake OpenAI server's /v1/audio/transcriptions; `--record` keeps the transcript under the WAV's sha256,
and that recording answers transcribe_audio offline (harness/models/replay.py "Transcriptions"), for
the same bytes only. tests/test_run_e2e.py checks the search, image and audio tasks of the whole
replayed smoke set.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from harness import exit_codes
from harness.models.replay import recorded_transcripts, recorded_turns
from harness.traces import EnvAction, ModelCall
from tests.fakes.openai_server import FakeOpenAI, text, tool_calls
from tests.helpers.e2e import explain, fake_config, harness, rows, trace

SMOKE = Path(__file__).resolve().parents[1] / "datasets" / "gaia-smoke"
MEMO_ID = "3546c9b5-4990-536f-bacb-b497a0871262"
WAV = SMOKE / "2023" / "validation" / "warehouse_voice_memo.wav"
HEARD = "Edith here: the pallets Aqua Flow sent back go to bay 14."


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def test_record_keeps_each_transcript_in_the_turn_that_asked_for_it():
    events = [ModelCall(tool_calls=[{"name": "transcribe_audio", "arguments": {"path": "a.wav"}}]),
              EnvAction(env="audio", action="transcribe_audio", model="w-1", sha256="ab12", transcript="hello"),
              EnvAction(env="audio", action="transcribe_audio", outcome="error", error="refused", sha256="cd34"),
              ModelCall(content="<solution>hello</solution>")]
    turns = recorded_turns(events)
    assert turns[0]["transcripts"] == {"ab12": {"model": "w-1", "text": "hello"}} and "transcripts" not in turns[1]
    assert recorded_transcripts(turns) == {"ab12": {"model": "w-1", "text": "hello"}}
    a, b = {"model": "m", "text": "a"}, {"model": "m", "text": "b"}
    assert recorded_transcripts([{"content": "x"}, {"transcripts": {"ef": a}}, {"transcripts": {"gh": b}}]) == {
        "ef": a, "gh": b}


@pytest.mark.docker
@pytest.mark.slow
def test_the_memo_is_transcribed_by_the_provider_recorded_and_replayed_offline(tmp_path, image):
    recording = tmp_path / "recorded.jsonl"
    script = [tool_calls(("transcribe_audio", {"path": "warehouse_voice_memo.wav"})),
              text("The memo names bay 14. <solution>14</solution>")]
    with FakeOpenAI(script, transcript=HEARD) as server:
        config = fake_config(tmp_path / "m.toml", server.base_url)
        config.write_text(config.read_text().replace("[llm.fake.model_info]",
                                                     'transcription_model = "whisper-1"\n[llm.fake.model_info]'))
        proc = harness("run", "--dataset", SMOKE, "--model", "fake", "--config", config, "--ids", MEMO_ID,
                       "--output-dir", tmp_path / "live", "--workers", 1, "--record", recording)
    assert proc.returncode == 0, explain(proc)
    (row,) = rows(tmp_path / "live")
    assert row["correct"] is True and row["tool_calls"] == ["transcribe_audio"], row
    (sent,) = server.transcriptions
    assert sent["file"] == WAV.read_bytes() and sent["model"] == "whisper-1"
    (line,) = [json.loads(x) for x in recording.read_text().splitlines()]
    assert line["turns"][0]["transcripts"] == {sha(WAV.read_bytes()): {"model": "whisper-1", "text": HEARD}}, line

    replay = tmp_path / "replay.toml"
    replay.write_text(f'[llm.rec]\nkind = "replay"\npath = "{recording}"\n')
    again = harness("run", "--dataset", SMOKE, "--model", "rec", "--config", replay, "--ids", MEMO_ID,
                    "--output-dir", tmp_path / "offline", "--workers", 1, "--fail-on-divergence")
    assert again.returncode == 0, explain(again)
    (offline,) = rows(tmp_path / "offline")
    assert offline["correct"] is True and offline["replay"]["diverged"] == 0 and offline["replay"]["checked"] == 1
    (heard,) = [e for e in trace(tmp_path / "offline", offline) if e["type"] == "env" and e["env"] == "audio"]
    assert heard["model"] == "whisper-1" and heard["transcript"] == HEARD and heard["sha256"] == sha(WAV.read_bytes())


@pytest.mark.docker
def test_a_replay_transcribes_only_the_audio_it_was_recorded_with(tmp_path, image):
    """The bundled recording's memo against another WAV: no transcript, an error result, a divergence (exit 5)."""
    data = tmp_path / "smoke"
    (data / "2023" / "validation").mkdir(parents=True)
    memo = [x for x in (SMOKE / "2023/validation/metadata.jsonl").read_text().splitlines() if MEMO_ID in x]
    (data / "2023" / "validation" / "metadata.jsonl").write_text(memo[0] + "\n")
    other = WAV.read_bytes()[:-2000]
    (data / "2023" / "validation" / WAV.name).write_bytes(other)
    shutil.copy(SMOKE / "replay.jsonl", data / "replay.jsonl")
    out = tmp_path / "out"
    proc = harness("run", "--dataset", data, "--model", "replay", "--output-dir", out, "--workers", 1,
                   "--fail-on-divergence")
    assert proc.returncode == exit_codes.DIVERGED, explain(proc)
    (row,) = rows(out)
    assert row["replay"]["diverged"] == 1 and row["env_outcomes"]["audio"] == {"error": 1}, row
    (heard,) = [e for e in trace(out, row) if e["type"] == "env" and e["env"] == "audio"]
    assert heard["sha256"] == sha(other) and "holds no transcript" in heard["error"], heard
