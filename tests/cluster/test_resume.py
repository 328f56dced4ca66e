"""Where a moved camera continues: its JSON Lines output, a cut last line, another run's file."""

from __future__ import annotations

import json
from pathlib import Path

import av
import numpy as np
import pytest

from cluster.resume import (KILL_SAFE_MP4, count_frame_records, cluster_overrides, last_frame_seq, prepare_jsonl,
                            seal_fragmented_mp4, segment_template)
from pipeline.config import parse_config
from pipeline.graph import build_graph
from pipeline.videofile import iso_boxes


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _frames(first: int, count: int) -> str:
    return "".join(json.dumps({"source": "cam", "seq": s, "objects": []}) + "\n" for s in range(first, first + count))


def test_first_placement_starts_the_file_with_its_event(tmp_path: Path) -> None:
    path = tmp_path / "cam.jsonl"
    path.write_text("old run\n", encoding="utf-8")
    assert prepare_jsonl(path, "cam", "run1", 0, 0, "node-a") == (0, False, None, None, None)
    (event,) = _records(path)
    assert (event["event"], event["run"], event["part"], event["start_seq"], event["node"]) == \
        ("placed", "run1", 0, 0, "node-a")


def test_later_placement_continues_after_the_last_record_and_cuts_a_partial_line(tmp_path: Path) -> None:
    path = tmp_path / "cam.jsonl"
    prepare_jsonl(path, "cam", "run1", 0, 0)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(_frames(0, 40) + '{"event":"stalled","source":"cam"}\n' + '{"source":"cam","seq":40,"obj')
    start, exact, frames, previous, written = prepare_jsonl(path, "cam", "run1", 1, 35)  # driver saw up to 34
    assert (start, exact, frames, written) == (40, True, 40, 40)
    assert (previous["part"], previous["start_seq"]) == (0, 0)
    recs = _records(path)  # every line whole again; the new placement's event last
    assert recs[-1]["event"] == "placed" and recs[-1]["start_seq"] == 40 and recs[-2]["event"] == "stalled"
    assert [r["seq"] for r in recs if "event" not in r] == list(range(40))


def test_a_file_of_another_run_is_not_continued(tmp_path: Path) -> None:
    path = tmp_path / "cam.jsonl"
    prepare_jsonl(path, "cam", "old-run", 0, 0)
    path.write_text(path.read_text() + _frames(0, 90))
    assert prepare_jsonl(path, "cam", "run2", 1, 35)[:2] == (35, False)
    assert [r.get("event") for r in _records(path)] == ["placed"]


def test_last_frame_seq_reads_back_over_large_tails(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    text = _frames(0, 3000) + "".join('{"event":"stalled","pad":"%s"}\n' % ("x" * 200) for _ in range(400))
    path.write_text(text, encoding="utf-8")  # the last frame record is about 80 kB before the end
    assert last_frame_seq(path) == 2999
    assert count_frame_records(path) == 3000


def test_segment_names() -> None:
    assert segment_template("{output}/{source}.mp4", 120) == "{output}/{source}.from120.mp4"
    assert segment_template("{output}/{source}", 7) == "{output}/{source}.from7"


def test_mp4_written_fragmented_and_pinning_off_unless_the_user_chose() -> None:
    spec = parse_config("""
pipelines:
  p:
    stages:
      - {name: decode, type: decode}
      - {name: det, type: detect, params: {model: m.xml, decoder: blazeface, config: {NUM_STREAMS: 2}}}
      - {name: pinned, type: detect, params: {model: m.xml, decoder: blazeface, config: {enable_cpu_pinning: true}}}
      - {name: mp4, type: encode}
      - {name: mkv, type: encode, params: {path: "{output}/{source}.mkv"}}
      - {name: mine, type: encode, params: {path: "{output}/{source}-2.mp4", container_options: {movflags: faststart}}}
      - {name: metadata, type: metadata}
""", check_files=False).get("p")
    out = cluster_overrides(build_graph(spec), {})
    assert out == {"mp4": {"container_options": KILL_SAFE_MP4},
                   "det": {"config": {"NUM_STREAMS": 2, "ENABLE_CPU_PINNING": False}}}


def _fragmented_mp4(path: Path, frames: int) -> None:
    """``frames`` frames of 64x48 H.264 at 25 fps, muxed as the cluster's encoders mux them."""
    with av.open(str(path), mode="w", container_options=KILL_SAFE_MP4) as out:
        stream = out.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for i in range(frames):
            image = np.full((48, 64, 3), (i * 37) % 256, np.uint8)
            out.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")))
        out.mux(stream.encode())


def _decoded(path: Path) -> int:
    with av.open(str(path)) as container:
        return sum(1 for _ in container.decode(video=0))


def test_a_segment_cut_mid_fragment_is_sealed_at_its_last_whole_fragment(tmp_path: Path) -> None:
    whole = tmp_path / "whole.mp4"
    _fragmented_mp4(whole, 50)
    boxes = iso_boxes(whole)
    mdats = [(offset, size) for kind, offset, size in boxes if kind == b"mdat"]
    assert len(mdats) >= 4 and boxes[-1][0] == b"mfra"  # a fragment every 0.2 s, the index at the close
    data = whole.read_bytes()
    with av.open(str(whole)) as container:  # packets per fragment: in file order, each in one mdat
        offsets = [p.pos for p in container.demux(video=0) if p.size]
    in_first_two = sum(1 for pos in offsets if pos < mdats[1][0] + mdats[1][1])

    killed = tmp_path / "killed.mp4"  # the process died writing the third fragment's data
    killed.write_bytes(data[:mdats[2][0] + mdats[2][1] // 2])
    with pytest.raises(av.error.FFmpegError):
        _decoded(killed)
    assert seal_fragmented_mp4(killed) == mdats[2][0] + mdats[2][1] // 2 - (mdats[1][0] + mdats[1][1])
    assert killed.read_bytes() == data[:mdats[1][0] + mdats[1][1]]
    assert _decoded(killed) == in_first_two > 0

    moof, moof_size = next((offset, size) for kind, offset, size in boxes if kind == b"moof" and offset > mdats[1][0])
    for cut in (moof + moof_size // 2, moof + moof_size):  # died in a fragment's header, or right after it
        header_only = tmp_path / f"header-{cut}.mp4"
        header_only.write_bytes(data[:cut])
        assert seal_fragmented_mp4(header_only) == cut - moof
        assert header_only.read_bytes() == data[:moof]

    assert seal_fragmented_mp4(whole) == 0 and whole.read_bytes() == data  # a closed file stays as it is
    lines = tmp_path / "cam.jsonl"
    lines.write_text(_frames(0, 3), encoding="utf-8")
    assert seal_fragmented_mp4(lines) == 0 and seal_fragmented_mp4(tmp_path / "missing.mp4") == 0
