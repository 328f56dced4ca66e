"""``on_error: skip | restart | stop`` through the real command line.

A user stage (:class:`pipeline.testing.Fail`) raises on every 10th frame of a
synthetic clip, in a pipeline file given with ``--config`` that also encodes an MP4
and writes JSON Lines:

* skip: the failing frames are dropped and counted, the run ends with exit 0;
* restart: the stage is closed and opened again on every failure (counted),
  exit 0;
* stop: exit != 0 with one line naming the stage and the source, and both
  outputs are finalised: the MP4 plays to its last frame and the JSON Lines
  file holds complete lines for exactly the frames that passed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import (INDEXED, cli_env, copy_clip, one_error_line, read_jsonl, succeeded, summary, vapipe,
                      video_frames)

FRAMES = 95  # --max-frames: 9 failures (seq 9, 19, ..., 89)
EVERY = 10

PIPELINE = """\
pipelines:
  flaky:
    description: decode, a stage failing on every {every}th frame, MP4 and JSON Lines
    stages:
      - name: decode
        type: decode
      - name: flaky
        type: "{stage}"
        params: {params}
        on_error: {policy}
      - name: encode
        type: encode
        params: {{preset: ultrafast}}
      - name: metadata
        type: metadata
"""


@pytest.fixture
def env(models_dir: Path) -> dict[str, str]:
    return cli_env(models_dir)


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory, make_clip) -> Path:
    return copy_clip(make_clip(INDEXED), tmp_path_factory.mktemp("clip") / "cam1.mp4")


def write_config(tmp_path: Path, policy: str, stage: str = "pipeline.testing:Fail",
                 params: str = f"{{every: {EVERY}}}") -> Path:
    path = tmp_path / "flaky.yaml"
    path.write_text(PIPELINE.format(every=EVERY, stage=stage, params=params, policy=policy), encoding="utf-8")
    return path


def run(env: dict[str, str], config: Path, clip: Path, out: Path, *extra: str):
    return vapipe(env, "run", "flaky", "--config", config, "--source", clip, "--output", out,
                  "--max-frames", str(FRAMES), "--json", "--no-progress", *extra)


def passed_seqs(n: int) -> list[int]:
    return [s for s in range(n) if (s + 1) % EVERY]


def check_outputs(out: Path, seqs: list[int]) -> None:
    """JSON Lines: complete lines for exactly ``seqs``; MP4: one decodable frame per record, in order."""
    records = read_jsonl(out / "cam1.jsonl")
    assert [r["seq"] for r in records] == seqs
    frames = video_frames(out / "cam1.mp4")
    assert len(frames) == len(records)
    assert (frames[-1].width, frames[-1].height) == (INDEXED.width, INDEXED.height)
    pts = [f.pts for f in frames]
    assert pts == sorted(pts) and len(set(pts)) == len(pts)
    # the last frame in the file is the last record's frame (same source time since the first)
    last_mp4 = float((frames[-1].pts - frames[0].pts) * frames[-1].time_base)
    assert last_mp4 == pytest.approx(records[-1]["pts_time"] - records[0]["pts_time"], abs=0.05)


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
def test_skip_drops_and_counts_failing_frames(env, tmp_path: Path, clip: Path, sync: bool) -> None:
    out = tmp_path / "out"
    proc = succeeded(run(env, write_config(tmp_path, "skip"), clip, out, *(["--sync"] if sync else [])))
    result = summary(proc)
    src = result["sources"][0]
    assert result["error"] is None and src["error"] is None
    assert src["decoded"] == FRAMES
    assert src["skipped_errors"] == FRAMES // EVERY
    assert src["frames"] == FRAMES - FRAMES // EVERY
    check_outputs(out, passed_seqs(FRAMES))
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("WARNING")]
    assert warnings and all("'flaky'" in ln and "'cam1'" in ln and "planned failure" in ln for ln in warnings)


def test_skip_warns_without_a_traceback(env, tmp_path: Path, clip: Path) -> None:
    proc = succeeded(run(env, write_config(tmp_path, "skip"), clip, tmp_path / "out"))
    assert "Traceback" not in proc.stderr, proc.stderr


def test_restart_closes_and_reopens_the_stage(env, tmp_path: Path, clip: Path) -> None:
    log = tmp_path / "lifecycle.log"
    config = write_config(tmp_path, "restart", stage="tests.faults.helpers:RecordingFail",
                          params=f"{{every: {EVERY}, log: '{log}'}}")
    out = tmp_path / "out"
    proc = succeeded(run(env, config, clip, out))
    assert "Traceback" not in proc.stderr, proc.stderr
    src = summary(proc)["sources"][0]
    failures = FRAMES // EVERY
    assert src["skipped_errors"] == failures and src["frames"] == FRAMES - failures and src["error"] is None
    # opened once, then closed and opened again per failure, and closed at the end
    assert log.read_text(encoding="utf-8").split() == ["open"] + ["close", "open"] * failures + ["close"]
    check_outputs(out, passed_seqs(FRAMES))
    restarts = [line for line in proc.stderr.splitlines() if "restarting" in line]
    assert len(restarts) == failures and all("'flaky'" in ln and "'cam1'" in ln for ln in restarts)


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
def test_stop_ends_the_run_with_one_line_and_finalised_outputs(env, tmp_path: Path, clip: Path,
                                                               sync: bool) -> None:
    out = tmp_path / "out"
    proc = run(env, write_config(tmp_path, "stop"), clip, out, *(["--sync"] if sync else []))
    line = one_error_line(proc)
    assert proc.returncode == 1
    assert "stage 'flaky'" in line and "source 'cam1'" in line and "planned failure on frame 9" in line
    result = summary(proc)
    assert result["error"] == line.removeprefix("vapipe: error: ")
    assert result["sources"][0]["frames"] == EVERY - 1
    check_outputs(out, list(range(EVERY - 1)))


def test_stop_is_the_default_for_builtin_stages(env, tmp_path: Path, clip: Path) -> None:
    """A built-in stage that fails (the encoder, here MJPEG with the limited-range format it lists
    but does not open with) stops the run."""
    config = tmp_path / "bad-codec.yaml"
    config.write_text(PIPELINE.format(every=EVERY, stage="pipeline.testing:Fail", params="{every: 1000}",
                                      policy="skip").replace("{preset: ultrafast}", "{codec: mjpeg, pix_fmt: yuv420p}"),
                      encoding="utf-8")
    proc = vapipe(env, "run", "flaky", "--config", config, "--source", clip, "--output", tmp_path / "out",
                  "--max-frames", "20", "--no-progress")
    line = one_error_line(proc)
    assert "'encode'" in line and "'cam1'" in line and "cannot set up 'mjpeg' (yuv420p" in line
    assert not (tmp_path / "out" / "cam1.mp4").exists()  # nothing playable was written: no file
