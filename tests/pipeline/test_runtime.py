from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from pipeline.config import parse_config
from pipeline.graph import build_graph
from pipeline.runtime import RunOptions, run_pipeline, source_ids
from pipeline.testing import COLLECTED
from tests.cluster.helpers import make_clip
from tests.live.helpers import ROOT, quiet_stream

LINEAR = """
pipelines:
  p:
    stages:
      - {name: src, type: "pipeline.testing:ListSource", params: {count: 30, decode_ms: 4}}
      - {name: infer, type: "pipeline.testing:SleepInfer", params: {ms: 8, requests: 2}}
      - {name: sink, type: "pipeline.testing:CollectSink"}
"""

BRANCHES = """
pipelines:
  p:
    stages:
      - {name: src, type: "pipeline.testing:ListSource", params: {count: 25}}
      - {name: a, type: "pipeline.testing:SleepInfer", params: {ms: 3, label: a}}
      - {name: b, type: "pipeline.testing:SleepInfer", params: {ms: 7, label: b}, inputs: [src]}
      - {name: sink, type: "pipeline.testing:CollectSink", inputs: [a, b]}
"""


def _run(text: str, tmp_path: Path, sources: list[str] | None = None, **kw) -> tuple:
    spec = parse_config(text, "test.yaml").get("p")
    graph = build_graph(spec)
    summary = run_pipeline(graph, sources or ["cam"], RunOptions(output_dir=tmp_path, handle_signals=False, **kw))
    return summary, COLLECTED["sink"]


@pytest.mark.parametrize("sync", [False, True])
def test_frames_leave_in_order_with_results(tmp_path: Path, sync: bool) -> None:
    summary, out = _run(LINEAR, tmp_path, sync=sync)
    assert summary.error is None
    frames = out["cam"]
    assert [f.seq for f in frames] == list(range(30))
    assert all(list(f.detections.label) == ["thing"] for f in frames)
    assert summary.sources[0].processed == 30


def test_async_overlaps_decode_of_next_frame_with_inference(tmp_path: Path) -> None:
    spec = parse_config(LINEAR, "t.yaml").get("p")
    graph = build_graph(spec)
    from pipeline import camera

    seen = {}
    orig = camera.Camera.open

    def spy(cam):  # keep a handle on the per-camera stage to read its intervals
        orig(cam)
        seen["infer"] = cam.stages["infer"]

    camera.Camera.open = spy
    try:
        summary = run_pipeline(graph, ["cam"], RunOptions(output_dir=tmp_path, handle_signals=False))
    finally:
        camera.Camera.open = orig
    assert summary.error is None
    iv = sorted(seen["infer"].intervals)
    overlapping = sum(1 for (_, s0, e0), (_, s1, _) in zip(iv, iv[1:]) if s1 < e0)
    # with two requests in flight, inference of N+1 starts before N has finished
    assert overlapping >= len(iv) // 2


def test_fan_out_and_fan_in_merge_results_on_the_same_frame(tmp_path: Path) -> None:
    summary, out = _run(BRANCHES, tmp_path)
    assert summary.error is None
    frames = out["cam"]
    assert [f.seq for f in frames] == list(range(25))
    assert all(sorted(f.detections.label) == ["a", "b"] for f in frames)


TWO_ENDS = """
pipelines:
  p:
    stages:
      - {name: src, type: "pipeline.testing:ListSource", params: {count: 25}}
      - {name: slow, type: "pipeline.testing:SleepInfer", params: {ms: 4, label: a}}
      - {name: sink, type: "pipeline.testing:CollectSink", inputs: [slow]}
      - {name: fast, type: "pipeline.testing:CollectSink", inputs: [src]}
"""


def test_a_frame_leaving_by_two_ends_is_counted_once(tmp_path: Path) -> None:
    summary, out = _run(TWO_ENDS, tmp_path)
    assert summary.error is None and [f.seq for f in out["cam"]] == list(range(25))
    assert summary.sources[0].processed == 25  # not 50: the frames, not their ways out


FLAKY_END = """
pipelines:
  p:
    stages:
      - {name: src, type: "pipeline.testing:ListSource", params: {count: 25}}
      - {name: slow, type: "pipeline.testing:SleepInfer", params: {ms: 4, label: a}}
      - {name: sink, type: "pipeline.testing:CollectSink", inputs: [slow]}
      - {name: flaky, type: "pipeline.testing:Fail", params: {every: 6}, on_error: skip, inputs: [src]}
      - {name: fast, type: "pipeline.testing:CollectSink", inputs: [flaky]}
"""


def test_a_frame_one_end_dropped_is_counted_when_the_other_hands_it_on(tmp_path: Path) -> None:
    summary, out = _run(FLAKY_END, tmp_path)
    assert summary.error is None and [f.seq for f in out["cam"]] == list(range(25))
    assert [f.seq for f in COLLECTED["fast"]["cam"]] == [s for s in range(25) if s % 6 != 5]
    src = summary.sources[0]
    assert (src.processed, src.skipped_errors, src.last_seq) == (25, 4, 24)


def test_frames_without_inference_still_leave_in_order(tmp_path: Path) -> None:
    text = LINEAR.replace("requests: 2}", "requests: 2, skip_every: 3}")
    summary, out = _run(text, tmp_path)
    frames = out["cam"]
    assert [f.seq for f in frames] == list(range(30))
    labelled = [len(f.detections) for f in frames]
    assert labelled.count(0) == 10 and labelled.count(1) == 20


def test_frames_without_inference_take_no_place_in_flight() -> None:
    from pipeline.frame import Frame
    from pipeline.testing import SleepInfer

    stage = SleepInfer(name="infer", ms=1, requests=1, every=4)
    frames = [Frame.from_image(np.zeros((4, 4, 3), np.uint8), "cam", seq) for seq in range(9)]
    with stage:
        for f in frames[:4]:  # one frame with inference, three passing by
            stage.submit(f)
        assert (stage.in_flight, stage.working, stage.over_depth()) == (4, 1, False)
        stage.submit(frames[4])  # a second frame with inference exceeds the depth of 1
        assert (stage.working, stage.over_depth()) == (2, True)
        assert [f.seq for f in stage.pop_oldest()] == [0]
        assert stage.working == 1 and not stage.over_depth()
        for f in frames[5:]:
            stage.submit(f)
        assert [f.seq for f in stage.drain()] == list(range(1, 9))
        assert stage.working == 0


def test_detection_every_nth_frame_overlaps_the_region_model_of_earlier_frames(tmp_path: Path) -> None:
    # "a" runs on every 3rd frame, "b" on the same frames and longer: while b works on frame
    # k, frames k+1 and k+2 wait behind it without taking a place, so a starts frame k+3.
    text = """
pipelines:
  p:
    stages:
      - {name: src, type: "pipeline.testing:ListSource", params: {count: 30}}
      - {name: a, type: "pipeline.testing:SleepInfer", params: {ms: 10, requests: 1, every: 3, label: a}}
      - {name: b, type: "pipeline.testing:SleepInfer", params: {ms: 25, requests: 1, every: 3, label: b}}
      - {name: sink, type: "pipeline.testing:CollectSink"}
"""
    from pipeline import camera

    seen = {}
    orig = camera.Camera.open

    def spy(cam):
        orig(cam)
        seen.update(cam.stages)

    camera.Camera.open = spy
    try:
        summary, out = _run(text, tmp_path)
    finally:
        camera.Camera.open = orig
    assert summary.error is None
    assert [f.seq for f in out["cam"]] == list(range(30))
    a = {seq: (s, e) for seq, s, e in seen["a"].intervals}
    b = {seq: (s, e) for seq, s, e in seen["b"].intervals}
    assert sorted(a) == sorted(b) == list(range(0, 30, 3))
    overlapped = [k for k in b if k + 3 in a and a[k + 3][0] < b[k][1]]
    assert len(overlapped) >= 7, overlapped


def test_several_sources_run_concurrently_with_own_results(tmp_path: Path) -> None:
    summary, out = _run(LINEAR, tmp_path, sources=["cam", "cam", "other"])
    assert summary.error is None
    assert sorted(out) == ["cam", "cam-2", "other"]
    assert all([f.seq for f in frames] == list(range(30)) for frames in out.values())


def test_max_frames_stops_each_source(tmp_path: Path) -> None:
    summary, out = _run(LINEAR, tmp_path, max_frames=7)
    assert [f.seq for f in out["cam"]] == list(range(7))


FAILING = """
pipelines:
  p:
    stages:
      - {name: src, type: "pipeline.testing:ListSource", params: {count: 40}}
      - {name: fail, type: "pipeline.testing:Fail", params: {every: 10}ON_ERROR}
      - {name: sink, type: "pipeline.testing:CollectSink"}
"""


def test_skip_policy_drops_failing_frames_and_counts_them(tmp_path: Path) -> None:
    summary, out = _run(FAILING.replace("ON_ERROR", ", on_error: skip"), tmp_path)
    assert summary.error is None
    assert len(out["cam"]) == 36
    assert summary.sources[0].skipped_errors == 4


def test_stop_policy_ends_the_run_with_a_one_line_error(tmp_path: Path) -> None:
    summary, out = _run(FAILING.replace("ON_ERROR", ", on_error: stop"), tmp_path)
    assert summary.error is not None
    assert "stage 'fail'" in summary.error and "planned failure on frame 9" in summary.error
    assert "\n" not in summary.error
    assert len(out["cam"]) <= 9


def test_restart_policy_reopens_the_stage_and_gives_up_when_it_keeps_failing(tmp_path: Path) -> None:
    summary, out = _run(FAILING.replace("ON_ERROR", ", on_error: restart"), tmp_path)
    assert summary.error is None and len(out["cam"]) == 36  # 4 failures: each frame lost, the stage reopened
    summary, out = _run(FAILING.replace("every: 10", "every: 2").replace("ON_ERROR", ", on_error: restart"), tmp_path)
    assert summary.error is None and len(out["cam"]) == 20  # a frame gets through after each restart
    summary, out = _run(FAILING.replace("every: 10", "every: 1").replace("ON_ERROR", ", on_error: restart"), tmp_path)
    assert summary.error is not None and "planned failure on frame 3 (failed again after 3 restarts in a row with " \
        "no frame through it; giving up)" in summary.error, summary.error
    assert out["cam"] == []


@pytest.mark.parametrize("fail", [10, 27, 29])
def test_a_failed_inference_skips_its_frame_alone(tmp_path: Path, fail: int) -> None:
    failing = f'"tests.pipeline.test_executor:FailingInfer", params: {{ms: 20, requests: 4, fail: [{fail}]}}'
    text = LINEAR.replace('"pipeline.testing:SleepInfer", params: {ms: 8, requests: 2}', failing + ", on_error: skip")
    summary, out = _run(text, tmp_path)
    assert summary.error is None and [f.seq for f in out["cam"]] == [s for s in range(30) if s != fail]
    assert (summary.sources[0].processed, summary.sources[0].skipped_errors) == (29, 1)


def test_user_stages_skip_per_frame_errors_by_default(tmp_path: Path) -> None:
    summary, out = _run(FAILING.replace("ON_ERROR", ""), tmp_path)
    assert summary.error is None and summary.sources[0].skipped_errors == 4


def test_names_and_own_overrides_per_source(tmp_path: Path) -> None:
    summary, collected = _run(LINEAR, tmp_path, sources=["a", "a"], source_ids=["north", "south"],
                              source_overrides=[{}, {"src": {"count": 12}}])
    assert [s.source for s in summary.sources] == ["north", "south"]
    assert [len(collected[n]) for n in ("north", "south")] == [30, 12]
    assert [s.last_seq for s in summary.sources] == [29, 11]


def test_names_must_be_distinct(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="distinct source ids"):
        _run(LINEAR, tmp_path, sources=["a", "b"], source_ids=["x", "x"])


def test_stop_event_ends_the_run_like_a_signal(tmp_path: Path) -> None:
    import threading

    stop = threading.Event()
    text = LINEAR.replace("count: 30", "count: 100000")
    timer = threading.Timer(1.0, stop.set)
    timer.start()
    try:
        summary, collected = _run(text, tmp_path, stop_event=stop)
    finally:
        timer.cancel()
    frames = collected["cam"]
    assert summary.error is None and 0 < len(frames) < 100000
    assert [f.seq for f in frames] == list(range(len(frames)))  # frames in flight finished, in order


def test_source_ids_are_short_distinct_and_avoid_names_in_use() -> None:
    uris = ["/clips/door.mp4", "rtsp://user:secret@10.0.0.5/door", "/other/door.mkv", "testsrc://bars?width=64"]
    assert source_ids(uris) == ["door", "door-2", "door-3", "bars"]
    assert source_ids(uris[:2], taken={"door", "door-2"}) == ["door-3", "door-4"]
    assert all("secret" not in sid for sid in source_ids(uris))
    assert source_ids(["udp://127.0.0.1:5000", "srt://cam:9000?mode=caller", "rtsp://cam/"]) == [
        "127.0.0.1_5000", "cam_9000", "cam"]


def test_a_start_past_the_end_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    text = """
pipelines:
  p:
    stages:
      - {name: decode, type: decode, params: {start_frame: 50}}
      - {name: sink, type: "pipeline.testing:CollectSink"}
"""
    summary, _ = _run(text, tmp_path, sources=["testsrc://bars?width=64&height=48&frames=10"])
    assert summary.error is None and summary.sources[0].processed == 0
    assert "no frame from start_frame 50 on (past its end?)" in caplog.text


def test_a_sink_that_cannot_write_fails_the_run_before_any_sink_writes(tmp_path: Path) -> None:
    """Paths are checked when the stages open: the encoder has written no frame when the
    metadata's folder turns out to be a file."""
    (tmp_path / "meta").write_text("")
    text = """
pipelines:
  p:
    stages:
      - {name: src, type: decode}
      - {name: encode, type: encode}
      - {name: metadata, type: metadata, params: {path: "{output}/meta/{source}.jsonl"}}
"""
    summary = run_pipeline(build_graph(parse_config(text, "test.yaml").get("p")),
                           ["testsrc://bars?width=64&height=48&frames=20"],
                           RunOptions(output_dir=tmp_path, handle_signals=False))
    assert summary.error is not None and "metadata: cannot write" in summary.error, summary.error
    assert "meta is not a folder" in summary.error and summary.sources[0].processed == 0
    assert not list(tmp_path.rglob("*.mp4"))


EMBEDDED = """
import sys, time
from pathlib import Path
from pipeline.config import parse_config
from pipeline.graph import build_graph
from pipeline.runtime import RunOptions, run_pipeline
text = '''
pipelines:
  p:
    stages:
      - {name: src, type: decode, params: {read_timeout_s: 3}}
      - {name: metadata, type: metadata}
'''
graph = build_graph(parse_config(text, "t.yaml").get("p"))
summary = run_pipeline(graph, [sys.argv[1]], RunOptions(output_dir=Path(sys.argv[2])))
print("returned", time.monotonic(), summary.sources[0].processed, flush=True)
"""


def test_a_program_embedding_the_runtime_exits_only_after_a_read_left_behind_ends(tmp_path: Path) -> None:
    """Stopped while its camera is quiet, run_pipeline returns at once; the program's exit then
    waits for the read left inside FFmpeg (tearing the interpreter down under it can crash)."""
    client_closed, done = threading.Event(), threading.Event()
    data = make_clip(tmp_path / "cam.ts", 50, size=(160, 120)).read_bytes()
    url = quiet_stream(data[: len(data) // 2], client_closed, done)
    proc = subprocess.Popen([sys.executable, "-c", EMBEDDED, url, str(tmp_path / "out")], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        jsonl = tmp_path / "out" / "cam.jsonl"
        deadline = time.monotonic() + 30
        while not (jsonl.exists() and jsonl.read_text()) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        time.sleep(0.5)  # inside the quiet read (read timeout 3 s)
        proc.send_signal(signal.SIGINT)
        interrupted = time.monotonic()
        out, err = proc.communicate(timeout=30)
        exited = time.monotonic()
    finally:
        done.set()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    _, returned, frames = out.split()
    assert float(returned) - interrupted < 1.0 and int(frames) > 0
    assert client_closed.is_set() and exited - interrupted > 1.0, f"exited {exited - interrupted:.2f} s after the stop"


@pytest.mark.parametrize(("sink", "clash"), [("{type: encode, params: {path: '{output}/same.mp4'}}", True),
                                              ("{type: metadata, params: {path: '{output}/all.jsonl'}}", False),
                                              ("{type: metadata, params: {path: '{output}/all.json', format: json}}",
                                               False)])
def test_cameras_whose_sink_would_write_one_file_are_refused_before_any_writes(tmp_path: Path, sink: str,
                                                                              clash: bool) -> None:
    """A sink without {source} in its path, given two cameras: an MP4 each would be one file
    (refused before any camera opens, so no camera has written a frame); records share it."""
    text = f"pipelines:\n  p:\n    stages:\n      - {{name: decode, type: decode}}\n      - {{name: out, {sink[1:]}\n"
    graph = build_graph(parse_config(text, "t.yaml").get("p"))
    out = tmp_path / "out"
    sources = ["testsrc://bars?width=64&height=48&frames=3", "testsrc://noise?width=64&height=48&frames=3"]
    if clash:
        with pytest.raises(ValueError) as err:
            run_pipeline(graph, sources, RunOptions(output_dir=out, handle_signals=False))
        assert str(err.value) == (f"stage 'out' of source 'noise' would write {out / 'same.mp4'}, which stage 'out' "
                                  "of source 'bars' writes; give each camera its own file ({source} in the path)")
        assert not out.exists()
    else:
        import json

        summary = run_pipeline(graph, sources, RunOptions(output_dir=out, handle_signals=False))
        assert summary.error is None
        written = (out / "all.jsonl").read_text().splitlines() if "jsonl" in sink else \
            [json.dumps(r) for r in json.loads((out / "all.json").read_text())]
        assert sorted(json.loads(r)["source"] for r in written) == ["bars"] * 3 + ["noise"] * 3
