"""Add the image and audio tasks of datasets/gaia-smoke to metadata.jsonl, with their attachments.

- `bar_chart_colours.png`: three unlabelled bars (red, green, blue); which colour is tallest can only be
  seen, not read: markitdown gives a non-vision model the picture's size, not its colours.
- `warehouse_voice_memo.wav`: a few seconds of synthesized tones standing in for a voice memo (no speech
  synthesizer is assumed here). Its words are MEMO: what the replay model's recording holds as its
  transcript (scripts/make_smoke_replay.py, harness/models/replay.py "Transcriptions"), so a real
  transcription model would not hear them; the question is about what the transcript says.

Stdlib only (zlib/struct for the PNG, wave for the WAV), byte-identical on every run. Idempotent:
re-running replaces these tasks. Usage: python3 scripts/make_smoke_media.py
"""

import json
import math
import struct
import uuid
import wave
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "datasets" / "gaia-smoke"
SPLIT = ROOT / "2023" / "validation"
META = SPLIT / "metadata.jsonl"
CHART, MEMO_FILE = "bar_chart_colours.png", "warehouse_voice_memo.wav"
BARS = [((200, 40, 40), 70, "red"), ((40, 160, 60), 130, "green"), ((40, 70, 200), 100, "blue")]
MEMO = ("Hi, it's Edith from the warehouse. The pallets Aqua Flow sent back this morning go to bay 14, "
        "not bay 9 as the delivery note says. Thanks.")
MEMO_ANSWER = "14"


def task_id(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"harness-gaia-smoke-media/{name}"))


def chart_png(width: int = 240, height: int = 160) -> bytes:
    """An RGB PNG: white, three bars standing on a grey baseline."""
    rows = []
    for y in range(height):
        row = bytearray(b"\x00")  # filter: none
        for x in range(width):
            colour = (255, 255, 255)
            if y >= height - 12:
                colour = (120, 120, 120)
            for i, (rgb, tall, _) in enumerate(BARS):
                if 30 + i * 70 <= x < 80 + i * 70 and height - 12 - tall <= y < height - 12:
                    colour = rgb
            row += bytes(colour)
        rows.append(bytes(row))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"".join(rows), 9))
            + chunk(b"IEND", b""))


def write_memo(path: Path, rate: int = 16000) -> None:
    """Mono 16-bit PCM: a rising run of short tones with gaps, about 3 s."""
    frames = bytearray()
    for n, freq in enumerate((440, 523, 587, 659, 784, 880, 988, 1047)):
        for t in range(int(rate * 0.3)):
            frames += struct.pack("<h", int(9000 * math.sin(2 * math.pi * freq * t / rate)))
        frames += b"\x00\x00" * int(rate * (0.05 if n % 2 else 0.1))
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(bytes(frames))


def tasks() -> list[dict]:
    tallest = max(BARS, key=lambda bar: bar[1])[2]
    rows = [
        (task_id("tallest-bar-colour"), CHART,
         "The attached image is a bar chart with three bars of different colours and no labels. Which colour is "
         "the tallest bar? Answer with the colour's name in lower case.",
         tallest, ["Look at the image", "Compare the bars' heights", "Name the tallest bar's colour"],
         "image viewer (vision)"),
        (task_id("voice-memo-bay"), MEMO_FILE,
         "The attached audio file is a voice memo from the warehouse of Northwind Garden Supply. According to the "
         "memo, in which bay do the pallets sent back by Aqua Flow go? Give the number only.",
         MEMO_ANSWER, ["Transcribe the audio", "Find the bay the memo names for the returned pallets"],
         "speech-to-text"),
    ]
    return [{"task_id": tid, "Question": q, "Level": 1, "Final answer": answer, "file_name": name,
             "Annotator Metadata": {"Steps": "\n".join(steps), "Number of steps": str(len(steps)), "Tools": tools}}
            for tid, name, q, answer, steps, tools in rows]


def main() -> None:
    (SPLIT / CHART).write_bytes(chart_png())
    write_memo(SPLIT / MEMO_FILE)
    new = tasks()
    ids = {t["task_id"] for t in new}
    kept = [line for line in META.read_text().splitlines() if json.loads(line)["task_id"] not in ids]
    META.write_text("\n".join(kept + [json.dumps(t) for t in new]) + "\n")
    for t in new:
        print(t["task_id"], t["Level"], t["file_name"], t["Final answer"])


if __name__ == "__main__":
    main()
