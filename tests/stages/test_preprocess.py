"""The preprocess stage: parameters, and whole runs whose outputs are in the camera's pixels.

Runs without the shared folder use a generated clip (a bright square on a dark
background) and a model-free detector (:class:`BrightSpot`), so the true position of
the object is known in every frame.
"""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from pipeline.config import ConfigError, parse_config
from pipeline.frame import Frame
from pipeline.graph import build_graph
from pipeline.runtime import RunOptions, run_pipeline
from stages.preprocess import Preprocess
from tests.cli import cli_env, one_error_line, vapipe
from tests.stages.preprocess_helpers import SQUARE, records, square_clip

W, H = 320, 240


def _config(stages: str) -> str:
    return f"""pipelines:
  p:
    stages:
      - {{name: decode, type: decode}}
{stages}"""


def _run(tmp_path: Path, stages: str, source: Path) -> Path:
    graph = build_graph(parse_config(_config(stages), "test.yaml").get("p"), "test.yaml")
    summary = run_pipeline(graph, [str(source)], RunOptions(output_dir=tmp_path, handle_signals=False))
    assert summary.error is None, summary.error
    return tmp_path


@pytest.mark.parametrize("params,needle", [
    ("{rotate: 45}", "parameter 'rotate': Input should be 0, 90, 180 or 270 (got 45)"),
    ("{flip: diagonal}", "parameter 'flip': Input should be 'none', 'horizontal' or 'vertical'"),
    ("{masks: [[[0, 0], [10, 0]]]}", "parameter 'masks': mask 0 has 2 point(s); a polygon needs at least 3"),
    ("{masks: [[[0, 0], [5, 5], [10, 10]]]}", "parameter 'masks': mask 0 has no area"),
    ("{masks: [[[0, 0, 1], [5, 0], [0, 5]]]}", "parameter 'masks': mask 0: point [0.0, 0.0, 1.0] is not [x, y]"),
    ("{crop: [0, 0, 100]}", "parameter 'crop': crop needs 4 numbers [x1, y1, x2, y2], got 3"),
    ("{crop: [-5, 0, 100, 100]}", "parameter 'crop': crop is outside the frame: coordinates must be >= 0"),
    ("{crop: [0.5, 0, 0.25, 1]}", "parameter 'crop': crop is empty: needs x1 < x2 and y1 < y2"),
    ("{width: 1}", "parameter 'width': Input should be greater than or equal to 2"),
    ("{scale: 0.5}", "unknown parameter 'scale'; valid: crop, rotate, flip, width, height, masks"),
])
def test_bad_parameters_are_one_line_errors_naming_stage_and_field(params: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(_config(f"      - {{name: prep, type: preprocess, params: {params}}}\n"), "cams.yaml")
    message = str(info.value)
    assert "\n" not in message and message.startswith("cams.yaml:5: pipeline 'p' stage 'prep': ")
    assert needle in message


def test_crop_larger_than_the_frame_stops_the_run_in_one_line(tmp_path: Path, models_dir_or_none) -> None:
    config = tmp_path / "p.yaml"
    config.write_text(_config("      - {name: prep, type: preprocess, params: {crop: [100, 0, 400, 200]}}\n"
                              "      - {name: metadata, type: metadata}\n"))
    proc = vapipe(cli_env(models_dir_or_none), "run", "p", "--config", config, "--source",
                  "testsrc://bars?width=320&height=240&frames=5", "--output", tmp_path / "out", "--no-progress")
    line = one_error_line(proc)
    assert "stage 'prep'" in line and "crop [100, 0, 400, 200] (pixels) is outside the 320x240 frame" in line


def test_a_join_of_branches_with_different_views_is_rejected() -> None:
    stages = ("      - {name: prep, type: preprocess, params: {rotate: 90}}\n"
              "      - {name: a, type: 'tests.stages.preprocess_helpers:BrightSpot'}\n"
              "      - {name: b, type: 'tests.stages.preprocess_helpers:BrightSpot', inputs: [decode]}\n"
              "      - {name: out, type: metadata, inputs: [a, b]}\n")
    with pytest.raises(ConfigError, match="stage 'out' joins branches that differ in the view stage"):
        build_graph(parse_config(_config(stages), "t.yaml").get("p"), "t.yaml")
    # the same join after the view is fine
    ok = stages.replace("inputs: [decode]", "inputs: [prep]")
    build_graph(parse_config(_config(ok), "t.yaml").get("p"), "t.yaml")


@pytest.fixture
def models_dir_or_none(tmp_path: Path) -> Path:
    """A models folder for the CLI (these runs load no model)."""
    return tmp_path / "no-models"


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[tuple[int, int]]]:
    path = tmp_path_factory.mktemp("clip") / "square.mp4"
    return path, square_clip(path, size=(W, H))


CROP = (40, 20, 300, 230)  # 260 x 210 of the 320 x 240 frame


def _to_view(box: np.ndarray) -> np.ndarray:
    """The test's own map for crop CROP, then 90 degrees clockwise (no scaling):
    view x = crop height - (y - y0), view y = x - x0."""
    x1, y1, x2, y2 = box
    ch = CROP[3] - CROP[1]
    return np.array([ch - (y2 - CROP[1]), x1 - CROP[0], ch - (y1 - CROP[1]), x2 - CROP[0]])


def test_crop_turn_and_scale_map_results_back_to_camera_pixels(tmp_path: Path, clip) -> None:
    """Boxes found in a cropped, turned and scaled view land on the square's camera pixels in
    the JSON Lines; ``view: preprocessed`` writes the view's own pixels; the MP4 keeps the
    camera's size with the crop outlined."""
    path, corners = clip
    stages = (f"      - {{name: prep, type: preprocess, params: {{crop: {list(CROP)}, rotate: 90, height: 130}}}}\n"
              "      - {name: spot, type: 'tests.stages.preprocess_helpers:BrightSpot'}\n"
              "      - {name: encode, type: encode}\n"
              "      - {name: view_encode, type: encode, params: {path: '{output}/view.mp4', view: preprocessed, "
              "annotate: false}}\n"
              "      - {name: metadata, type: metadata}\n"
              "      - {name: view_metadata, type: metadata, params: {path: '{output}/view.jsonl', "
              "view: preprocessed}}\n")
    out = _run(tmp_path, stages, path)
    camera, view = records(out / "square.jsonl"), records(out / "view.jsonl")
    assert len(camera) == len(view) == len(corners)
    inside = 0
    for rec, vrec, (x, y) in zip(camera, view, corners):
        assert (rec["width"], rec["height"]) == (W, H)
        assert (vrec["width"], vrec["height"]) == (106, 130)  # 210 x 260 turned, scaled to height 130 (even)
        truth = np.array([x, y, x + SQUARE, y + SQUARE], np.float64)
        clipped = np.array([max(truth[0], CROP[0]), max(truth[1], CROP[1]), min(truth[2], CROP[2]),
                            min(truth[3], CROP[3])])
        if clipped[2] - clipped[0] < 3 or clipped[3] - clipped[1] < 3:
            assert rec["objects"] == []  # outside the region of interest: never seen
            continue
        inside += 1
        (obj,) = rec["objects"]
        assert np.allclose(obj["box"], clipped, atol=2.5), (obj["box"], clipped)
        corner = np.array(obj["keypoints"][0])  # the view's top-left corner of the box ...
        assert np.allclose(corner, [clipped[0], clipped[3]], atol=2.5)  # ... is the camera's bottom-left
        (vobj,) = vrec["objects"]
        assert np.allclose(vobj["box"], _to_view(clipped) * (130 / 260), atol=1.5)
    assert inside >= 10

    with av.open(str(out / "square.mp4")) as c:
        frames = [f.to_ndarray(format="gray") for f in c.decode(video=0)]
    assert len(frames) == len(corners) and frames[0].shape == (H, W)
    x1, y1, x2, y2 = CROP
    outline = np.concatenate([frames[0][y1 + 2:y2 - 2, x1], frames[0][y1 + 2:y2 - 2, x2 - 1],
                              frames[0][y1, x1 + 2:x2 - 2], frames[0][y2 - 1, x1 + 2:x2 - 2]])
    assert outline.mean() > 150 and frames[0][120, 100:200].mean() < 60  # white outline, dark inside

    # the transformed frame's own video: the turned, scaled crop, the square where the view saw it
    with av.open(str(out / "view.mp4")) as c:
        turned = [f.to_ndarray(format="gray") for f in c.decode(video=0)]
    assert len(turned) == len(corners) and turned[0].shape == (130, 106)
    centres = [((o["box"][0] + o["box"][2]) / 2, (o["box"][1] + o["box"][3]) / 2, grey)
               for grey, vrec in zip(turned, view) for o in vrec["objects"]
               if min(o["box"][2] - o["box"][0], o["box"][3] - o["box"][1]) >= 6]
    assert len(centres) >= 10 and all(grey[int(cy), int(cx)] > 200 for cx, cy, grey in centres)


def test_a_masked_object_is_never_found_and_the_mp4_shows_the_mask(tmp_path: Path, clip) -> None:
    path, corners = clip
    mask = [[150, 100], [320, 100], [320, 240], [150, 240]]  # the square's path from frame ~13 on
    stages = (f"      - {{name: prep, type: preprocess, params: {{masks: [{mask}], rotate: 180}}}}\n"
              "      - {name: spot, type: 'tests.stages.preprocess_helpers:BrightSpot'}\n"
              "      - {name: encode, type: encode, params: {annotate: false}}\n"
              "      - {name: metadata, type: metadata}\n")
    out = _run(tmp_path, stages, path)
    found = 0
    for rec, (x, y) in zip(records(out / "square.jsonl"), corners):
        hidden = x >= 150 - 1 and y >= 100 - 1  # wholly inside the mask (edge pixels are masked too)
        if hidden:
            assert rec["objects"] == [], rec
        elif x + SQUARE < 150 or y + SQUARE < 100:  # wholly outside: found where it is
            (obj,) = rec["objects"]
            assert np.allclose(obj["box"], [x, y, x + SQUARE, y + SQUARE], atol=0.01)
            found += 1
    assert found >= 5 and sum(x >= 149 and y >= 99 for x, y in corners) >= 5
    with av.open(str(out / "square.mp4")) as c:
        frames = [f.to_ndarray(format="gray") for f in c.decode(video=0)]
    assert max(f[102:238, 152:318].max() for f in frames) < 30  # black, with the square passing under it
    assert frames[0][50, 50] > 30  # the rest of the picture is there


def test_process_works_without_open_as_in_a_with_block() -> None:
    image = np.zeros((H, W, 3), np.uint8)
    image[:10, :20] = 255  # top-left corner: bottom-right once turned 180 degrees
    view = Preprocess(rotate=180).process(Frame.from_image(image))
    assert (view.width, view.height) == (W, H)
    assert view.image()[H - 10:, W - 20:].min() == 255 and view.image()[:10, :20].max() == 0


def test_a_motion_stage_before_the_view_has_its_regions_and_drawing_mapped_into_it() -> None:
    """Motion watches the whole camera picture; the models see its right half: the regions the
    tracker compares with boxes, and the shapes the video sink draws, are in the view's pixels
    after ``preprocess`` (the sink maps shapes back), while the camera frame keeps its own."""
    from pipeline.frame import OVERLAY
    from stages.motion import BOXES, Motion

    def picture(x: int) -> np.ndarray:
        image = np.full((240, 320, 3), 90, np.uint8)
        image[100:140, x:x + 30] = 250
        return image

    with Motion(calibration_frames=2, draw=True, name="motion") as motion, \
            Preprocess(crop=[0.5, 0, 1, 1], name="prep") as prep:
        for seq in range(6):
            frame = motion(Frame.from_image(picture(180 + 10 * seq), "cam", seq))
            view = prep(frame)
    camera_boxes = frame.attrs[("motion", BOXES)]
    assert len(camera_boxes) >= 1 and camera_boxes[:, 0].min() >= 160  # the square, in camera pixels
    view_boxes = view.attrs[("motion", BOXES)]
    assert np.allclose(view_boxes, camera_boxes - [160, 0, 160, 0])
    assert np.allclose(view.attrs[("motion", OVERLAY)][0].points[0], camera_boxes[0, :2] - [160, 0])
    assert view.original().attrs is view.attrs  # sinks read what stages after the view added
