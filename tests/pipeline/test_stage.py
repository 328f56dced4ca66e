"""A stage built in Python (embedded without the runner): its parameters and their errors."""

from __future__ import annotations

import pytest

from stages.decode import Decode
from stages.detect import Detect
from stages.track import Track


def test_parameters_by_name_as_a_dict_or_as_params_with_changes() -> None:
    assert Track(min_hits=3).params.min_hits == 3
    assert Track({"min_hits": 3}, lost_frames=5).params.lost_frames == 5
    base = Detect.Params(model="m.xml", decoder="ssd")
    changed = Detect(base, requests=3)
    assert (changed.params.requests, changed.params.model, base.requests) == (3, "m.xml", 0)


@pytest.mark.parametrize("make, error, message", [
    (lambda: Detect(modle="m.xml"), ValueError, r"^Detect: unknown parameter 'modle'; valid: .*\bmodel\b"),
    (lambda: Decode(uri="a.mp4", threads="many"), ValueError,
     r"^Decode: parameter 'threads': Input should be a valid integer.* \(got 'many'\)$"),
    (lambda: Detect(Detect.Params(model="m.xml", decoder="ssd"), requests=-1), ValueError,
     r"^Detect: parameter 'requests': Input should be greater than or equal to 0 \(got -1\)$"),
    (lambda: Detect("omz/person-detection-retail-0013"), TypeError,
     r"^Detect: the first argument is the parameters \(Detect.Params or a dict\), got "
     r"'omz/person-detection-retail-0013'; pass parameters by name, e.g. Detect\(model=...\)$"),
    (lambda: Track(min_hits=0), ValueError, r"^Track: parameter 'min_hits': Input should be greater than or equal"),
])
def test_bad_parameters_are_one_line_naming_the_stage_and_the_parameter(make, error, message) -> None:
    with pytest.raises(error, match=message) as info:
        make()
    assert "\n" not in str(info.value)
