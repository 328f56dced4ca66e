"""Label lists and files, and their count against the model's classes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stages.models.labels import LabelsError, class_ids_for, load_labels
from tests.stages.models.synthetic import constant_model, yolo_head
from tests.stages.models.test_yolo import detect


@pytest.mark.parametrize("name, text", [
    ("l.txt", "person\n\n# comment\ntraffic light\ncar\n"),
    ("l.json", json.dumps(["person", "traffic light", "car"])),
    ("l.yaml", "{0: person, 1: traffic light, 2: car}"),
    ("data.yaml", "path: x\nnames:\n  0: person\n  1: traffic light\n  2: car\n"),
])
def test_label_files(tmp_path: Path, name: str, text: str) -> None:
    (tmp_path / name).write_text(text)
    assert load_labels(str(tmp_path / name)) == ["person", "traffic light", "car"]


def test_bad_label_files_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(LabelsError, match="labels file not found"):
        load_labels(str(tmp_path / "none.txt"))
    (tmp_path / "bad.json").write_text("[1, 2")
    with pytest.raises(LabelsError, match=r"bad.json: invalid JSON"):
        load_labels(str(tmp_path / "bad.json"))
    for gapped in ({0: "a", 5: "b"}, {1: "person"}):  # a name for every class, from 0 on
        with pytest.raises(LabelsError, match=r"keys must be the class ids 0, 1, \.\.\. without a gap .*, got \["):
            load_labels(gapped)


def test_class_names_and_ids() -> None:
    labels = ["person", "car"]
    assert class_ids_for(["car", 0, "#7"], labels, "classes") == [1, 0, 7]
    with pytest.raises(LabelsError, match=r"classes: 'bus' is not a label of this model; labels: person, car"):
        class_ids_for(["bus"], labels, "classes")


def test_a_labels_file_with_the_wrong_count_names_both_numbers(tmp_path: Path) -> None:
    path = constant_model(tmp_path / "m.xml", {"o": yolo_head([[32, 32, 8, 8]], [[0.9, 0, 0]], 84)})
    (tmp_path / "two.txt").write_text("a\nb\n")
    with pytest.raises(LabelsError, match=r"labels file .*two.txt has 2 names but model .*m.xml has 3 classes"):
        detect(path, labels=str(tmp_path / "two.txt"))


def test_a_class_id_the_model_does_not_have_names_the_valid_range(tmp_path: Path) -> None:
    """An id beyond the model's classes would silently keep nothing on every frame."""
    assert class_ids_for([2, "#0"], None, "classes", count=3) == [2, 0]
    with pytest.raises(LabelsError, match=r"classes: class id 7 is out of range; valid: 0\.\.2"):
        class_ids_for(["#7"], ["a", "b", "c"], "classes", count=3)
    path = constant_model(tmp_path / "m.xml", {"o": yolo_head([[32, 32, 8, 8]], [[0.9, 0, 0]], 84)})
    with pytest.raises(LabelsError, match=r"class id 500 is out of range; valid: 0\.\.2 \(the model has 3 classes\)"):
        detect(path, classes=[500])
