"""End-to-end tests of the ``vapipe`` command line, run as a real subprocess.

Error cases check the exit code and that stderr is a single line (no
traceback) naming the problem; successful runs check stdout and the files
written (JSON Lines records, MP4 frames and timestamps).
"""

from __future__ import annotations

import json
import re
import subprocess
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from tests.cli import ROOT, one_error_line, vapipe
from tests.cli import cli_env as make_env
from tests.media import CLIP

BUILTIN_TYPES = ("classify", "decode", "detect", "encode", "metadata")
RECORD_KEYS = {"source", "seq", "pts_time", "width", "height", "objects"}
OBJECT_KEYS = {"label", "score", "box", "track_id", "attributes"}

# shared clips, for the tests that look for people and faces in the pictures
WALKING_GIF = "face-demographics-walking.gif"       # 480x270, 12.5 fps, 35 frames
HEAD_POSE_GIF = "head-pose-face-detection-female-and-male.gif"  # 480x270, 12.5 fps, 56 frames


# helpers ---------------------------------------------------------------------------------
@pytest.fixture
def cli_env(models_dir: Path) -> dict[str, str]:
    return make_env(models_dir)


def ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, f"exit {proc.returncode}\nstderr: {proc.stderr}\nstdout: {proc.stdout}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def read_jsonl(path: Path) -> list[dict]:
    assert path.is_file(), f"{path} was not written"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def check_record(rec: dict, source: str, seq: int, width: int, height: int) -> None:
    assert RECORD_KEYS <= rec.keys(), rec
    assert rec["source"] == source
    assert rec["seq"] == seq
    assert isinstance(rec["pts_time"], float)
    assert (rec["width"], rec["height"]) == (width, height)
    assert isinstance(rec["objects"], list)
    for obj in rec["objects"]:
        check_object(obj, width, height)


def check_object(obj: dict, width: int, height: int) -> None:
    assert OBJECT_KEYS <= obj.keys(), obj
    assert isinstance(obj["label"], str) and obj["label"]
    assert 0.0 <= obj["score"] <= 1.0
    x1, y1, x2, y2 = obj["box"]
    assert -1 <= x1 < x2 <= width + 1 and -1 <= y1 < y2 <= height + 1, obj["box"]
    assert obj["track_id"] is None or isinstance(obj["track_id"], int)
    assert isinstance(obj["attributes"], dict)


def video_frames(path: Path) -> list:
    """Every frame of the file's video stream, decoded with PyAV (raises if it cannot be)."""
    import av

    assert path.is_file(), f"{path} was not written"
    with av.open(str(path)) as container:
        return list(container.decode(video=0))


def write_pipelines(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pipelines.yaml"
    path.write_text(text, encoding="utf-8")
    return path


# errors ---------------------------------------------------------------------------------
def test_missing_source_file_is_one_line_naming_the_path(cli_env, tmp_path: Path) -> None:
    line = one_error_line(vapipe(cli_env, "run", "persons", "--source", "/no/such.mp4",
                                 "--output", tmp_path / "out", "--no-progress"))
    assert "/no/such.mp4" in line
    assert "not found" in line


def test_text_file_named_mp4_is_not_a_readable_video(cli_env, tmp_path: Path) -> None:
    fake = tmp_path / "x.mp4"
    fake.write_text("this is not a video\n" * 10, encoding="utf-8")
    line = one_error_line(vapipe(cli_env, "run", "persons", "--source", fake,
                                 "--output", tmp_path / "out", "--no-progress"))
    assert str(fake) in line
    assert re.search(r"cannot open|not a readable video|invalid data", line, re.IGNORECASE), line
    assert not (tmp_path / "out" / "x.jsonl").exists()


UNKNOWN_TYPE = """\
pipelines:
  p:
    stages:
      - name: decode
        type: decode
      - name: magic
        type: magic_detector
      - name: metadata
        type: metadata
"""


@pytest.mark.parametrize("command", ["run", "validate", "list"])
def test_unknown_stage_type_names_file_line_and_valid_types(cli_env, tmp_path: Path, command: str) -> None:
    cfg = write_pipelines(tmp_path, UNKNOWN_TYPE)
    args = ["--config", cfg]
    if command == "run":
        args = ["p", "--source", tmp_path / "whatever.mp4", "--output", tmp_path / "out", *args]
    line = one_error_line(vapipe(cli_env, command, *args))
    assert f"{cfg}:6:" in line  # the line of the stage `- name: magic`
    assert "magic_detector" in line
    for valid in BUILTIN_TYPES:
        assert valid in line, f"{valid!r} missing from: {line}"


def test_unknown_parameter_from_set_names_it_and_the_valid_ones(cli_env, tmp_path: Path, clip: Path) -> None:
    line = one_error_line(vapipe(cli_env, "run", "persons", "--source", clip,
                                 "--set", "person_detect.treshold=0.5", "--output", tmp_path / "out"))
    assert "'treshold'" in line
    assert "person_detect" in line
    valid = line.split("valid:", 1)[1]
    for name in ("model", "decoder", "device", "requests"):
        assert name in valid, line
    assert not (tmp_path / "out").exists(), "nothing may run on an invalid pipeline"


def test_unknown_parameter_in_file_names_file_line_and_valid_ones(cli_env, tmp_path: Path) -> None:
    cfg = write_pipelines(tmp_path, """\
pipelines:
  p:
    stages:
      - name: decode
        type: decode
      - name: metadata
        type: metadata
        params:
          pathh: out.jsonl
""")
    line = one_error_line(vapipe(cli_env, "validate", "--config", cfg))
    assert f"{cfg}:6:" in line
    assert "'pathh'" in line
    assert "include_landmarks" in line.split("valid:", 1)[1]


@pytest.mark.parametrize("params, expected", [
    ("{codec: h265x}", "parameter 'codec': 'h265x' is not a video encoder of this FFmpeg; for example libx264"),
    ("{path: '{output}/{camera}.mp4'}", "parameter 'path': bad path template '{output}/{camera}.mp4'"),
])
def test_validate_names_an_unknown_encoder_or_template_before_any_run(cli_env, tmp_path: Path, params: str,
                                                                      expected: str) -> None:
    cfg = write_pipelines(tmp_path, f"""\
pipelines:
  p:
    stages:
      - {{name: decode, type: decode}}
      - {{name: encode, type: encode, params: {params}}}
""")
    line = one_error_line(vapipe(cli_env, "validate", "--config", cfg))
    assert f"{cfg}:5:" in line and expected in line, line


def test_missing_model_file_is_named(cli_env, tmp_path: Path, clip: Path) -> None:
    line = one_error_line(vapipe(cli_env, "run", "persons", "--source", clip,
                                 "--set", "person_detect.model=/no/model.tflite", "--output", tmp_path / "out"))
    assert "/no/model.tflite" in line
    assert "not found" in line


@pytest.mark.parametrize("command", ["run", "validate"])
def test_catalogue_model_missing_from_models_dir_suggests_pull(cli_env, tmp_path: Path, clip: Path,
                                                               command: str) -> None:
    empty = tmp_path / "models"
    empty.mkdir()
    env = {**cli_env, "VAPIPE_MODELS_DIR": str(empty)}
    if command == "run":
        args, model = ["persons", "--source", clip, "--output", tmp_path / "out"], "pose_detection"
    else:  # the first pipeline of pipelines.yaml, faces, fails on its first model
        args, model = [], "face_detection_short_range"
    line = one_error_line(vapipe(env, command, *args))
    assert f"'mediapipe/{model}'" in line
    assert str(empty) in line
    assert "vapipe models pull" in line


# list / graph / validate -------------------------------------------------------------------
def test_list_prints_every_pipeline_with_its_description(cli_env) -> None:
    proc = ok(vapipe(cli_env, "list"))
    expected = yaml.safe_load((ROOT / "pipelines.yaml").read_text(encoding="utf-8"))["pipelines"]
    assert {"faces", "ocr", "persons"} <= expected.keys()
    header, *lines = proc.stdout.splitlines()
    # the file it read comes first (the tests run in the repository: ./pipelines.yaml)
    assert header == f"# from {ROOT / 'pipelines.yaml'} (current directory)", header
    assert len(lines) == len(expected)
    for name, body in expected.items():
        row = [ln for ln in lines if ln.split()[0] == name]
        assert len(row) == 1, proc.stdout
        assert row[0].rstrip().endswith(body["description"].strip()), row[0]


FACES_EDGES = [("decode", "face_detect"), ("face_detect", "landmarks"), ("landmarks", "encode"),
               ("encode", "metadata")]


@pytest.mark.parametrize("fmt", ["mermaid", "dot", "text"])
def test_graph_formats(cli_env, fmt: str) -> None:
    out = ok(vapipe(cli_env, "graph", "faces", "--format", fmt)).stdout
    if fmt == "mermaid":
        assert out.splitlines()[0].startswith(("flowchart", "graph"))
        for a, b in FACES_EDGES:
            assert re.search(rf"^\s*{a}\s*-->\s*{b}\s*$", out, re.MULTILINE), (a, b, out)
        assert out.count("-->") == len(FACES_EDGES)
    elif fmt == "dot":
        assert out.lstrip().startswith("digraph")
        assert out.rstrip().endswith("}")
        for a, b in FACES_EDGES:
            assert re.search(rf'"{a}"\s*->\s*"{b}"', out), (a, b, out)
        assert out.count("->") == len(FACES_EDGES)
    else:
        for stage, kind in [("decode", "decode"), ("face_detect", "detect"), ("landmarks", "classify"),
                            ("encode", "encode"), ("metadata", "metadata")]:
            assert re.search(rf"\b{stage}\b.*\b{kind}\b", out), (stage, out)
        for a, b in FACES_EDGES:
            assert re.search(rf"\b{b}\b.*<-.*\b{a}\b", out), (a, b, out)


def test_graph_of_unknown_pipeline_lists_the_valid_ones(cli_env) -> None:
    line = one_error_line(vapipe(cli_env, "graph", "nope"))
    assert "'nope'" in line
    for name in ("faces", "ocr", "persons"):
        assert name in line


@pytest.mark.parametrize("args, names", [
    (["graph", "faces", "--format", "svg"], ["graph: argument --format", "'svg'", "'mermaid'"]),
    (["run", "persons"], ["run: the following arguments are required: --source"]),
    (["run", "persons", "--source", "a.mp4", "--max-frames", "ten"], ["--max-frames", "'ten'"]),
    (["models", "fetch"], ["models: argument ACTION", "'fetch'", "'pull'", "'list'"]),
    (["bench", "persons"], ["bench: the following arguments are required: --source"]),
])
def test_a_usage_error_is_one_line_naming_the_argument(cli_env, args: list[str], names: list[str]) -> None:
    line = one_error_line(vapipe(cli_env, *args))
    assert all(name in line for name in names), line
    assert line.endswith("--help)"), line


@pytest.mark.parametrize("args, start", [
    (["tune", "faces", "--source", "rtsp://127.0.0.1:9/cam"], "--source rtsp://127.0.0.1:9/cam: tune compares"),
    (["tune", "faces", "--source", "CLIP", "--out", "FILE/x.yaml"], "--out FILE/x.yaml: FILE is a file"),
    (["tune", "faces", "--source", "CLIP", "--out", "DIR"], "--out DIR: is a directory"),
    (["quantize", "faces", "--source", "CLIP", "--out", "DIR/int8.onnx"], "--out DIR/int8.onnx: must end in .xml"),
    (["run", "faces", "--source", "CLIP", "--sync", "--requests", "4"], "--sync runs one request per camera"),
])
def test_outputs_and_options_that_cannot_work_are_refused_before_any_work(cli_env, clip: Path, tmp_path: Path,
                                                                          args: list[str], start: str) -> None:
    (tmp_path / "file").write_text("")
    values = {"CLIP": str(clip), "FILE": str(tmp_path / "file"), "DIR": str(tmp_path)}

    def filled(text: str) -> str:
        for key, value in values.items():
            text = text.replace(key, value)
        return text

    line = one_error_line(vapipe(cli_env, *map(filled, args)))
    assert line.startswith(f"vapipe: error: {filled(start)}"), line


def test_a_run_that_fails_before_writing_leaves_no_output_directory(cli_env, clip: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    # MJPEG lists yuv420p but opens only with it in full range: the check of the file passes
    line = one_error_line(vapipe(cli_env, "run", "faces", "--source", clip, "--output", out, "--set",
                                 "encode.codec=mjpeg", "--set", "encode.pix_fmt=yuv420p"))
    assert "': encode: cannot set up 'mjpeg' (yuv420p" in line and "StageError" not in line, line
    assert not out.exists()


def test_an_unknown_device_names_the_option_and_the_valid_ones(cli_env, clip: Path) -> None:
    line = one_error_line(vapipe(cli_env, "run", "persons", "--source", clip, "--device", "TPU"))
    assert line.startswith("vapipe: error: --device TPU: unknown device 'TPU'; valid: CPU, GPU"), line


def test_a_device_not_on_this_machine_is_refused_before_the_run(tmp_path: Path, clip: Path) -> None:
    """Checked for every pipeline at the start, not when a model is loaded (a GPU on a machine
    without one; a pipeline with no model, where the option would do nothing)."""
    import openvino as ov

    if "GPU" in ov.Core().available_devices:
        pytest.skip("this machine has a GPU")
    cfg = tmp_path / "p.yaml"
    cfg.write_text("""
pipelines:
  find:
    stages:
      - {name: src, type: decode}
      - {name: faces, type: detect, params: {model: nowhere/face.xml, decoder: blazeface}}
  plain:
    stages:
      - {name: src, type: decode}
      - {name: meta, type: metadata}
""")
    env = make_env(tmp_path / "models")
    line = one_error_line(vapipe(env, "run", "find", "--config", cfg, "--source", clip, "--device", "GPU"))
    assert line.startswith("vapipe: error: --device GPU: device GPU not available; available: ") and "CPU" in line, line
    line = one_error_line(vapipe(env, "run", "plain", "--config", cfg, "--source", clip, "--device", "CPU",
                                 "--output", tmp_path / "out"))
    assert line == "vapipe: error: --device CPU: pipeline 'plain' runs no model (stages: src, meta); leave it out"
    assert not (tmp_path / "out").exists()


def test_validate_default_file_prints_ok(cli_env) -> None:
    proc = ok(vapipe(cli_env, "validate"))
    assert proc.stdout.strip() == "ok"


# runs -------------------------------------------------------------------------------------
def test_run_persons_json_summary_and_jsonl(cli_env, tmp_path: Path, clip: Path) -> None:
    out = tmp_path / "out"
    proc = ok(vapipe(cli_env, "run", "persons", "--source", clip, "--max-frames", "30",
                     "--json", "--output", out))
    summary = json.loads(proc.stdout)  # stdout is the JSON document and nothing else
    assert summary["pipeline"] == "persons"
    assert summary["error"] is None
    assert summary["stopped_by_signal"] is False
    src = summary["sources"][0]
    assert src["source"] == clip.stem
    assert src["frames"] == 30
    assert src["fps"] > 0
    det = summary["stages"]["person_detect"]
    assert det["count"] == 30
    assert det["mean_ms"] > 0 and det["p95_ms"] >= det["p50_ms"] > 0

    jsonl = out / f"{clip.stem}.jsonl"
    assert summary["outputs"] == [str(jsonl)]
    records = read_jsonl(jsonl)
    assert len(records) == 30
    for i, rec in enumerate(records):
        check_record(rec, clip.stem, i, CLIP.width, CLIP.height)
    times = [r["pts_time"] for r in records]
    assert times[0] == pytest.approx(0.0)
    assert times[-1] == pytest.approx(29 / CLIP.fps)
    assert all(b > a for a, b in zip(times, times[1:]))


SHORT_GIF = CLIP.with_(container="gif", width=320, height=240, frames=35)  # ends before --max-frames 40


def test_several_sources_in_one_run_get_their_own_outputs(cli_env, tmp_path: Path, make_clip) -> None:
    out = tmp_path / "out"
    clip, gif = make_clip(CLIP, stem="cam"), make_clip(SHORT_GIF, stem="short")
    proc = ok(vapipe(cli_env, "run", "persons", "--source", clip, "--source", clip, "--source", gif,
                     "--max-frames", "40", "--json", "--output", out))
    summary = json.loads(proc.stdout)
    expected = {clip.stem: (40, CLIP.width, CLIP.height),
                f"{clip.stem}-2": (40, CLIP.width, CLIP.height),
                gif.stem: (35, SHORT_GIF.width, SHORT_GIF.height)}  # the GIF ends before --max-frames
    assert [s["source"] for s in summary["sources"]] == list(expected)
    assert [s["frames"] for s in summary["sources"]] == [n for n, _, _ in expected.values()]
    outputs = summary["outputs"]
    assert len(outputs) == len(set(outputs)) == 3
    assert sorted(outputs) == sorted(str(out / f"{name}.jsonl") for name in expected)
    per_source = {}
    for name, (count, width, height) in expected.items():
        records = read_jsonl(out / f"{name}.jsonl")
        assert len(records) == count, name
        for i, rec in enumerate(records):
            check_record(rec, name, i, width, height)
        per_source[name] = records
    # the same clip twice gives the same results, under both names
    strip = [[{k: v for k, v in r.items() if k != "source"} for r in per_source[n]]
             for n in (clip.stem, f"{clip.stem}-2")]
    assert strip[0] == strip[1]


def test_people_walking_through_a_gif_are_written_with_the_full_schema(cli_env, tmp_path: Path,
                                                                       videos_dir: Path) -> None:
    out = tmp_path / "out"
    ok(vapipe(cli_env, "run", "persons", "--source", videos_dir / WALKING_GIF, "--json", "--output", out))
    records = read_jsonl(out / "face-demographics-walking.jsonl")
    assert len(records) == 35
    people = [o for r in records for o in r["objects"]]
    assert len(people) >= 10
    assert {o["label"] for o in people} == {"person"}
    for obj in people:
        check_object(obj, 480, 270)


def _faces_run(cli_env: dict[str, str], gif: Path, out: Path, frames_expected: int,
               size: tuple[int, int]) -> list[dict]:
    """``vapipe run faces`` on a GIF: the MP4 holds one frame per JSON Lines record, on the
    source's clock (GIF frame delays) from 0; returns the records."""
    summary = json.loads(ok(vapipe(cli_env, "run", "faces", "--source", gif, "--json", "--output", out)).stdout)
    name = gif.stem
    assert summary["sources"][0]["frames"] == frames_expected
    assert sorted(summary["outputs"]) == sorted([str(out / f"{name}.mp4"), str(out / f"{name}.jsonl")])

    frames = video_frames(out / f"{name}.mp4")
    records = read_jsonl(out / f"{name}.jsonl")
    assert len(frames) == frames_expected
    assert len(records) == len(frames)
    assert (frames[0].width, frames[0].height) == size
    times = [float(f.pts * f.time_base) for f in frames]
    assert all(b > a for a, b in zip(times, times[1:])), times
    for i, rec in enumerate(records):
        check_record(rec, name, i, *size)
    # the file follows the source clock (GIF frame delays), starting at 0
    assert times == pytest.approx([r["pts_time"] - records[0]["pts_time"] for r in records], abs=0.006)
    assert times[-1] > 4.0  # 56 frames of 80-90 ms
    return records


def test_gif_source_writes_mp4_on_the_source_clock(cli_env, tmp_path: Path, make_clip) -> None:
    spec = CLIP.with_(container="gif", width=480, height=270, frames=56, delays_cs=(8, 9, 9))
    _faces_run(cli_env, make_clip(spec, stem="delays"), tmp_path / "out", 56, (480, 270))


def test_faces_on_gif_writes_mp4_matching_jsonl(cli_env, tmp_path: Path, videos_dir: Path) -> None:
    out = tmp_path / "async"
    name = "head-pose-face-detection-female-and-male"
    records = _faces_run(cli_env, videos_dir / HEAD_POSE_GIF, out, 56, (480, 270))
    faces = [o for r in records for o in r["objects"]]
    assert len(faces) >= 56
    assert all(o["label"] == "face" and o["attributes"].get("landmarks") == 468 for o in faces)

    # --sync (one request, no overlap) must give the same results in the same order
    sync_out = tmp_path / "sync"
    sync_summary = json.loads(ok(vapipe(cli_env, "run", "faces", "--sync", "--source", videos_dir / HEAD_POSE_GIF,
                                        "--json", "--output", sync_out)).stdout)
    assert sync_summary["mode"] == "sync"
    sync_records = read_jsonl(sync_out / f"{name}.jsonl")
    assert [r["seq"] for r in sync_records] == [r["seq"] for r in records]
    assert [[o["box"] for o in r["objects"]] for r in sync_records] == \
        [[o["box"] for o in r["objects"]] for r in records]
    assert sync_records == records
    assert len(video_frames(sync_out / f"{name}.mp4")) == 56


@pytest.fixture(params=["synthetic", "people"])
def pictures(request: pytest.FixtureRequest) -> tuple[Path, int]:
    """(video, fewest people the detector must find per picture taken from it): the
    synthetic clip (nothing to find), or the shared GIF of a person walking."""
    if request.param == "synthetic":
        return request.getfixturevalue("clip"), 0
    return request.getfixturevalue("videos_dir") / WALKING_GIF, 1


def _frames(path: Path, count: int, size: tuple[int, int]) -> list:
    import av
    import cv2

    images = []
    with av.open(str(path)) as container:
        for frame in container.decode(video=0):
            images.append(cv2.resize(frame.to_ndarray(format="bgr24"), size, interpolation=cv2.INTER_AREA))
            if len(images) == count:
                break
    assert len(images) == count
    return images


def test_image_folder_source(cli_env, tmp_path: Path, pictures: tuple[Path, int]) -> None:
    import cv2

    video, people = pictures
    folder = tmp_path / "shots"
    folder.mkdir()
    for i, image in enumerate(_frames(video, 12, (320, 180))):
        assert cv2.imwrite(str(folder / f"img_{i:03d}.png"), image)
    (folder / "notes.txt").write_text("not an image", encoding="utf-8")  # ignored
    out = tmp_path / "out"
    summary = json.loads(ok(vapipe(cli_env, "run", "persons", "--source", folder, "--json",
                                   "--output", out)).stdout)
    assert summary["sources"][0]["frames"] == 12
    records = read_jsonl(out / "shots.jsonl")
    assert len(records) == 12
    for i, rec in enumerate(records):
        check_record(rec, "shots", i, 320, 180)
        assert rec["pts_time"] == pytest.approx(i / 25)  # decode.fps default
    # the walking person is found in the images
    assert sum(len(r["objects"]) for r in records) >= 3 * people


def test_avi_source(cli_env, tmp_path: Path, pictures: tuple[Path, int]) -> None:
    import av

    video, people = pictures
    avi = tmp_path / "walk.avi"
    with av.open(str(avi), "w") as container:
        stream = container.add_stream("mpeg4", rate=Fraction(25, 2))
        stream.width, stream.height, stream.pix_fmt = 480, 270, "yuv420p"
        for image in _frames(video, 10, (480, 270)):
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")))
        container.mux(stream.encode(None))
    assert len(video_frames(avi)) == 10

    out = tmp_path / "out"
    summary = json.loads(ok(vapipe(cli_env, "run", "persons", "--source", avi, "--json",
                                   "--output", out)).stdout)
    assert summary["error"] is None
    assert summary["sources"][0]["frames"] == 10
    records = read_jsonl(out / "walk.jsonl")
    assert len(records) == 10
    for i, rec in enumerate(records):
        check_record(rec, "walk", i, 480, 270)
    times = [r["pts_time"] for r in records]
    assert times[-1] - times[0] == pytest.approx(9 * 0.08, abs=1e-3)
    assert sum(len(r["objects"]) for r in records) >= 2 * people


@pytest.mark.parametrize("flag, value", [("--cpus-per-camera", "0.5"), ("--camera-fps", "10"),
                                         ("--cameras-per-actor", "4")])
def test_cluster_options_without_a_cluster_are_refused(cli_env, clip: Path, flag: str, value: str) -> None:
    line = one_error_line(vapipe(cli_env, "run", "persons", "--source", clip, flag, value))
    assert line == f"vapipe: error: {flag} needs --cluster", line


def test_a_reader_that_leaves_early_ends_the_command_quietly(cli_env) -> None:
    """``vapipe graph ... | head``: the pipe closed under the output is no error to report."""
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "pipeline", "graph", "faces", "--format", "dot"], cwd=ROOT,
                            env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # before the command writes
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141 and err == ""
