"""`transcribe_audio`: a workspace audio file sent to the model provider's speech-to-text, from the host.

Offered only when the run's model section names a `transcription_model` (`[llm.NAME]
transcription_model = "whisper-1"`). The path is confined to the workspace inside the sandbox
(files.CONFINE), the file is read out of it (`Sandbox.read_file`, at most MAX_AUDIO_BYTES: the
OpenAI API's own limit is 25 MB), and sent from the agent's process on the host, so the key never
enters the sandbox: the official `openai` client's `audio.transcriptions.create` (multipart POST
to `<base_url>/audio/transcriptions`) over the harness's bounded HTTP client (models/http.py),
with the section's key, timeout and retries (or to its `transcription_base_url` with the key of
`transcription_api_key_env`: ModelSection.transcription_endpoint). The transcript is saved as
/workspace/transcripts/<file>.txt and its first page returned through the file environment
(read_file shows the others). Each call is one `env` event (env "audio", action
"transcribe_audio", with the model, the bytes sent, the audio's `sha256` (16 hex digits) and the
`transcript`, so `harness run --record` keeps it: harness/models/replay.py); every failure
(no such file, too big, the server's refusal, a timeout) is a tool result starting "Error".

Each request to the server is a paid call of the instance (models/meter.py `paying`, with the agent's meter the
family hands over): checked before it is sent (--max-instance-cost, the run's --max-cost: a budget reached
stops the instance, LimitExceeded) and, once transcribed, counted at the section's `transcription_price_per_call`
(dollars; a budget needs it: config.py) in the agent's cost.

A replay model answers from its recording instead (`ReplayAudio`): a recorded turn's `transcripts`
map an audio's sha256 to its text and the model that made it, so the same file gets the same
transcript offline and any other file is an error; it is offered when the instance's recording
holds transcripts (or the replay section names a transcription_model), and needs no key or server.
"""

from __future__ import annotations

import hashlib
import os
import time
from typing import TYPE_CHECKING

from harness.environments.files import CONFINE, FileEnv
from harness.environments.scripts import outcome_of, script_reply
from harness.errors import ModelError, SandboxRequestError
from harness.models.replay import recorded_transcripts
from harness.sandbox.contract import WORKSPACE
from harness.traces import EnvAction

if TYPE_CHECKING:
    import openai

    from harness.models.config import ModelSection
    from harness.models.meter import Meter

MAX_AUDIO_BYTES = 25 * 1000 * 1000
TRANSCRIPTS = "transcripts"  # under the workspace

LOCATE = CONFINE + r"""
if not os.path.isfile(real):
    out(error=f"no such file: {sys.argv[1]!r}")
out(path=real, bytes=os.path.getsize(real))
"""

SAVE = r"""
import os, sys
os.makedirs(os.path.dirname(sys.argv[1]), exist_ok=True)
with open(sys.argv[1], "w", encoding="utf-8") as fh:
    fh.write(sys.stdin.read())
"""


class AudioEnv:
    def __init__(self, files: FileEnv, section: ModelSection, *, max_bytes: int = MAX_AUDIO_BYTES):
        assert section.transcription_model, "AudioEnv needs a section with a transcription_model"
        self.files, self.section, self.max_bytes = files, section, max_bytes
        self.model: str = section.transcription_model
        self._client: openai.OpenAI | None = None
        self.meter: Meter | None = None  # the agent's (the family's `metered`): each request is a paid call

    def client(self) -> openai.OpenAI:
        if self._client is None:
            import openai

            from harness.models.http import sync_client

            base_url, key = self.section.transcription_endpoint()
            self._client = openai.OpenAI(api_key=key, base_url=base_url, timeout=self.section.timeout,
                                         max_retries=self.section.max_retries, http_client=sync_client())
        return self._client

    def transcribe(self, path: str) -> str:
        started = time.monotonic()
        data = {"model": self.model, **self._transcript(path)}
        self.files.tracer.emit(EnvAction(env="audio", action="transcribe_audio", args={"path": path},
                                         outcome=outcome_of(data), seconds=round(time.monotonic() - started, 4),
                                         **data))
        text = data.get("transcript")
        if text is None:
            return f"Error: {data['error']}"
        name = os.path.basename(data["path"])
        saved = f"{TRANSCRIPTS}/{name}.txt"
        self.files.sandbox.exec(["python3", "-c", SAVE, f"{WORKSPACE}/{saved}"], stdin=text, timeout=30)
        return (f"Transcript of {path} by {data['model']}, saved as {WORKSPACE}/{saved}; "
                f"read_file({saved!r}, page) shows any other page.\n" + self.files.read(saved))

    def _transcript(self, path: str) -> dict:
        """{"transcript", "path", "bytes", "sha256", "chars"} (and "model" when it was not self.model's),
        or {"error", ...} (and "outcome" "timeout" when it timed out)."""
        located = script_reply(self.files.sandbox.exec(["python3", "-c", LOCATE, path], timeout=30),
                               f"finding {path!r}", 30)
        if "error" in located:
            return located
        if located["bytes"] > self.max_bytes:
            return {**located, "error": f"too big: {path} is {located['bytes']} bytes, more than the "
                                        f"{self.max_bytes} bytes transcribe_audio sends"}
        try:
            audio = self.files.sandbox.read_file(located["path"], max_bytes=self.max_bytes)
        except SandboxRequestError as exc:  # e.g. unreadable, or grown past the limit since it was found
            return {**located, "error": f"cannot read {path}: {exc}"}
        sent = {**located, "sha256": hashlib.sha256(audio).hexdigest()[:16]}
        heard = self._paid(os.path.basename(located["path"]), audio, sent["sha256"])
        return {**sent, **heard, **({"chars": len(heard["transcript"])} if "transcript" in heard else {})}

    def _paid(self, name: str, audio: bytes, sha256: str) -> dict:
        """`_send` as one paid call of the instance's meter (LimitExceeded past a budget); a transcript costs
        transcription_price_per_call."""
        if self.meter is None:
            return self._send(name, audio, sha256)
        from harness.usage import Usage

        with self.meter.paying() as pay:
            heard = self._send(name, audio, sha256)
            if "transcript" in heard:
                pay(Usage(cost=self.section.transcription_price_per_call or 0.0))
        return heard

    def _send(self, name: str, audio: bytes, sha256: str) -> dict:
        """{"transcript"} from the provider's /audio/transcriptions, or {"error"} (and "outcome")."""
        import openai

        from harness.models.http import too_large

        try:
            reply = self.client().audio.transcriptions.create(model=self.model, file=(name, audio))
        except openai.APITimeoutError:
            return {"error": f"timeout: the transcription server did not answer within "
                             f"{self.section.timeout:g} s", "outcome": "timeout"}
        except openai.APIStatusError as exc:
            return {"error": f"the transcription server answered {exc.status_code}: {exc.message}"}
        except (openai.APIError, ModelError) as exc:
            reason = too_large(exc) or exc
            return {"error": f"transcription failed: {type(reason).__name__}: {reason}"}
        return {"transcript": reply.text}


class ReplayAudio(AudioEnv):
    """transcribe_audio of a replay model: the recorded transcript of the same audio (by its sha256), in
    the recorded model's name (the tool's result names it)."""

    def __init__(self, files: FileEnv, section: ModelSection, recorded: dict[str, dict[str, str]]):
        self.files, self.section, self.max_bytes = files, section, MAX_AUDIO_BYTES
        self.model = section.transcription_model or "replay"
        self.recorded = recorded
        self.meter = None

    def _send(self, name: str, audio: bytes, sha256: str) -> dict:
        if sha256 in self.recorded:
            return {"transcript": self.recorded[sha256]["text"], "model": self.recorded[sha256]["model"]}
        return {"error": f"replay: the recording holds no transcript of {name} (sha256 {sha256}): "
                         "not the audio the recording was made with"}


def audio_env(files: FileEnv, section: ModelSection, replay_turns: list[dict] | None = None) -> AudioEnv | None:
    """The transcription environment of a run's model section (a replay model's: of its instance's
    recorded turns), or None when it has none to offer."""
    if section.kind == "replay":
        recorded = recorded_transcripts(replay_turns or [])
        return ReplayAudio(files, section, recorded) if recorded or section.transcription_model else None
    return AudioEnv(files, section) if section.transcription_model else None
