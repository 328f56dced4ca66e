"""The shipped pipelines for models users bring (objects, vehicles, people), run through the
command line with the shared models on short cuts of the shared clips (where people and
cars are in view)."""

from __future__ import annotations

import json
from pathlib import Path

import av
import pytest

from tests.cli import cli_env, succeeded, vapipe
from tests.video import decode, encode

PERSON_CLIP = "one-by-one-person-detection.mp4"
FRAMES = 20
FLAGS = {"is_male", "has_bag", "has_backpack", "has_hat", "has_longsleeves", "has_longpants", "has_longhair",
         "has_coat_jacket"}


@pytest.fixture(scope="module")
def clips(videos_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("cuts")
    return {"people": encode(decode(videos_dir / PERSON_CLIP, 100, FRAMES), folder / "people.mp4"),
            "cars": encode(decode(videos_dir / "car-detection.mp4", 62, FRAMES), folder / "cars.mp4")}


def run(models_dir: Path, tmp_path: Path, name: str, source: Path, *sets: str) -> list[dict]:
    args = [a for s in sets for a in ("--set", s)]
    succeeded(vapipe(cli_env(models_dir), "run", name, "--source", source, "--output", tmp_path, "--no-progress",
                     *args, timeout=300))
    with av.open(str(tmp_path / f"{source.stem}.mp4")) as mp4:
        assert sum(1 for _ in mp4.decode(video=0)) == FRAMES
    return [json.loads(line) for line in (tmp_path / f"{source.stem}.jsonl").read_text().splitlines()]


def test_objects_finds_people_with_coco_labels(models_dir: Path, clips: dict[str, Path], tmp_path: Path) -> None:
    records = run(models_dir, tmp_path, "objects", clips["people"])
    people = [o for r in records for o in r["objects"] if o["label"] == "person"]
    assert len(people) >= FRAMES and all(o["class_id"] == 0 and o["score"] > 0.25 for o in people)
    assert all(o["attributes"] == {} for r in records for o in r["objects"])


def test_objects_with_a_model_path_and_classes(models_dir: Path, clips: dict[str, Path], tmp_path: Path) -> None:
    model = models_dir / "yolo" / "yolo11n_int8_openvino_model"
    records = run(models_dir, tmp_path, "objects", clips["people"], f"detect.model={model}",
                  "detect.classes=[tv, remote, bus]", "detect.threshold=0.05")
    labels = {o["label"] for r in records for o in r["objects"]}
    assert "tv" in labels and labels <= {"tv", "remote", "bus"}


def test_people_have_their_attributes(models_dir: Path, clips: dict[str, Path], tmp_path: Path) -> None:
    records = run(models_dir, tmp_path, "people", clips["people"])
    people = [o for r in records for o in r["objects"]]
    assert len(people) >= FRAMES
    for person in people:
        assert person["label"] == "person" and person["class_id"] == 1
        attrs = person["attributes"]
        assert FLAGS <= attrs.keys() and all(isinstance(attrs[f], bool) for f in FLAGS)
        x1, y1, x2, y2 = person["box"]
        for point in ("top_color_point", "bottom_color_point"):
            px, py = attrs[point]
            assert x1 - 1 <= px <= x2 + 1 and y1 - 1 <= py <= y2 + 1
    assert any(any(o["attributes"][f] for f in FLAGS) for o in people)


def test_vehicles_get_colour_and_type_and_nothing_else_does(models_dir: Path, clips: dict[str, Path],
                                                            tmp_path: Path) -> None:
    records = run(models_dir, tmp_path, "vehicles", clips["cars"], "detect.threshold=0.2")
    objects = [o for r in records for o in r["objects"]]
    vehicles = [o for o in objects if o["label"] in ("car", "truck", "bus")]
    assert vehicles and len(objects) > len(vehicles)
    for obj in objects:
        if obj in vehicles:
            assert obj["attributes"]["color"] in ("white", "gray", "yellow", "red", "green", "blue", "black")
            assert obj["attributes"]["type"] in ("car", "van", "truck", "bus")
        else:
            assert obj["attributes"] == {}


@pytest.mark.parametrize("name", ["objects", "vehicles", "people"])
def test_shipped_pipelines_validate(shared_models_dir: Path, name: str) -> None:
    from pipeline.config import load_config
    from pipeline.graph import build_graph

    build_graph(load_config(Path(__file__).resolve().parents[2] / "pipelines.yaml").get(name))
