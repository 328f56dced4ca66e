"""Helpers for the fault tests: running the real CLI in a subprocess, damaging
clips, reading the outputs back, and a user stage that records its lifecycle (to
see the ``restart`` error policy close and reopen it)."""

from __future__ import annotations

import json
import random
import shutil
import struct
import subprocess
from pathlib import Path

from pydantic import Field

from pipeline.testing import Fail
from tests.cli import ROOT, cli_env, one_error_line, succeeded  # noqa: F401 - re-exported
from tests.cli import vapipe as run_cli
from tests.media import CLIP

#: synthetic H.264 clip (tests/media.py); the 'moov' box is before 'mdat' (fast start)
INDEXED = CLIP
#: the same with 'moov' after 'mdat', so a cut file has no index
INDEX_AT_END = CLIP.with_(faststart=False)

#: no run of the CLI may take longer than this (a hang is a failure, not a stuck test run)
TIMEOUT_S = 60.0


def vapipe(env: dict[str, str], *args: str | Path, timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """The CLI with the fault tests' hang limit."""
    return run_cli(env, *args, timeout=timeout)


def summary(proc: subprocess.CompletedProcess[str]) -> dict:
    """The ``--json`` summary printed on stdout."""
    return json.loads(proc.stdout)


def read_jsonl(path: Path) -> list[dict]:
    """Every line parses as a JSON object and the file ends with a newline (no cut line)."""
    assert path.is_file(), f"{path} was not written"
    text = path.read_text(encoding="utf-8")
    assert text == "" or text.endswith("\n"), f"{path} ends in the middle of a line: {text[-200:]!r}"
    records = [json.loads(line) for line in text.splitlines()]
    assert all(isinstance(r, dict) for r in records)
    return [r for r in records if "event" not in r]


def video_frames(path: Path) -> list:
    """Every frame of the file's first video stream; raises if the file cannot be decoded to its end."""
    import av

    assert path.is_file(), f"{path} was not written"
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        frames = []
        for packet in container.demux(stream):
            frames.extend(stream.codec_context.decode(packet))  # an FFmpegError fails the test
        assert not any(f.is_corrupt for f in frames), f"{path} has corrupt frames"
        return frames


def mp4_boxes(data: bytes) -> dict[str, tuple[int, int]]:
    """Top-level boxes of an MP4: type -> (offset, size)."""
    boxes: dict[str, tuple[int, int]] = {}
    pos = 0
    while pos + 8 <= len(data):
        size, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if size == 1:
            size = struct.unpack(">Q", data[pos + 8:pos + 16])[0]
        elif size == 0:
            size = len(data) - pos
        boxes.setdefault(kind.decode("latin-1"), (pos, size))
        if size < 8:
            break
        pos += size
    return boxes


def truncated_copy(src: Path, dst: Path, fraction: float) -> Path:
    data = src.read_bytes()
    dst.write_bytes(data[:int(len(data) * fraction)])
    return dst


def corrupted_copy(src: Path, dst: Path, at: float = 0.5, nbytes: int = 4096, seed: int = 1234) -> Path:
    """A copy with ``nbytes`` random bytes (seeded) written over the 'mdat' payload at fraction ``at``."""
    data = bytearray(src.read_bytes())
    offset, size = mp4_boxes(bytes(data))["mdat"]
    pos = offset + 16 + int((size - 16) * at)
    rng = random.Random(seed)
    data[pos:pos + nbytes] = bytes(rng.randrange(256) for _ in range(nbytes))
    dst.write_bytes(bytes(data))
    return dst


def copy_clip(src: Path, dst: Path) -> Path:
    shutil.copyfile(src, dst)
    return dst


class RecordingFail(Fail):
    """:class:`pipeline.testing.Fail` that appends ``open``/``close`` to the file ``log``."""

    class Params(Fail.Params):
        log: str = Field(description="file the lifecycle events are appended to")

    params: Params

    def _record(self, event: str) -> None:
        with open(self.params.log, "a", encoding="utf-8") as f:
            f.write(event + "\n")

    def open(self) -> None:
        self._record("open")

    def close(self) -> None:
        self._record("close")
