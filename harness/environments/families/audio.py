"""transcribe_audio, when the model section names a transcription model (a replay model's: when its
recording has transcripts); the speech-to-text call is made from the agent's process on the host
(harness/environments/audio.py), a paid call through the agent's meter."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.datasets.model import Instance
from harness.environments import Environments
from harness.environments.audio import AudioEnv, audio_env
from harness.environments.family import Setup, Tool, ToolFamily

if TYPE_CHECKING:
    from harness.models.meter import Meter


class Audio(ToolFamily[AudioEnv]):
    name, order = "audio", 60

    def offered(self, setup: Setup) -> bool:
        return setup.model is not None

    def build(self, setup: Setup, envs: Environments) -> AudioEnv | None:
        assert setup.model is not None, "offered only with a model section"
        return audio_env(envs.file, setup.model, setup.replay_turns)

    def metered(self, env: AudioEnv, meter: Meter) -> None:
        env.meter = meter  # each transcription is a paid call of the instance

    def tools(self, envs: Environments, instance: Instance | None) -> list[Tool]:
        audio = envs.of(Audio)
        if audio is None or envs.file is None:
            return []

        async def transcribe_audio(path: str) -> str:
            """Transcribe a workspace audio file (mp3, wav, m4a, ...; at most 25 MB) to text with a
            speech-to-text model; the transcript is saved in /workspace/transcripts."""
            return await envs.call(audio.transcribe, path)

        return [transcribe_audio]
