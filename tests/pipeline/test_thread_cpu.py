"""CPU time of this process's threads, and FFmpeg's frame-decoding threads found by name."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from pipeline.thread_cpu import ffmpeg_decoder_threads, thread_cpu_s


def test_ffmpeg_decoding_threads_are_found_by_name(tmp_path: Path) -> None:
    import av

    from tests.media import CLIP, write_clip

    path = write_clip(tmp_path / "clip.mp4", CLIP)
    seen: set[int] = set()
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_type, stream.thread_count = "FRAME", 2
        for _ in container.decode(stream):
            seen.update(ffmpeg_decoder_threads())
    assert len(seen) >= 1
    assert threading.get_native_id() not in seen
    assert all(t != threading.get_native_id() for t in ffmpeg_decoder_threads())


def test_a_busy_thread_has_cpu_time_and_an_unknown_one_none() -> None:
    """The CPU time read for a thread grows while it works; a thread id that is not this
    process's reads as unknown."""
    me = threading.get_native_id()
    before = thread_cpu_s(me)
    end = time.thread_time() + 0.1
    while time.thread_time() < end:
        pass
    after = thread_cpu_s(me)
    assert before is not None and after is not None and after - before >= 0.05
    assert thread_cpu_s(2**31 - 1) is None
