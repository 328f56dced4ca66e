"""Zones and lines on scripted tracks: boxes with fixed track ids, frame by frame."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from pipeline.config import ConfigError, parse_config
from pipeline.frame import EVENTS, OVERLAY, RECORD, TRACKS_ENDED, Detections, Frame
from stages.metadata import Metadata
from stages.zones import Zones

W, H = 400, 300
IMAGE = np.zeros((H, W, 3), np.uint8)
# a horizontal line across the middle, drawn left to right: moving down crosses "in"
LINE = {"door": {"points": [[0.25, 0.5], [0.75, 0.5]]}}


def box_at(x: float, y: float, w: float = 20, h: float = 30) -> list[float]:
    """The box whose bottom centre (the default anchor) is at (x, y)."""
    return [x - w / 2, y - h, x + w / 2, y]


def run(zones: Zones, tracks: dict[int, list[list[float] | None]], labels: dict[int, str] | None = None,
        ended: dict[int, list[int]] | None = None, predicted: set[int] = frozenset()
        ) -> tuple[list[dict], list[Frame]]:
    """Feed scripted tracks (per track id, a box per frame or None) and collect the events; on the
    frames in ``predicted`` every box is the tracker's prediction (no detection ran)."""
    n = max(len(v) for v in tracks.values())
    events, frames = [], []
    for s in range(n):
        ids = [t for t, boxes in tracks.items() if s < len(boxes) and boxes[s] is not None]
        f = Frame.from_image(IMAGE, "cam", s, pts=s, time_base=Fraction(1, 10))
        f.detections = Detections(xyxy=np.array([tracks[t][s] for t in ids], np.float32).reshape(-1, 4),
                                  score=[0.9] * len(ids), label=[(labels or {}).get(t, "person") for t in ids],
                                  track_id=ids, attributes=[{"predicted": True} if s in predicted else {}
                                                            for _ in ids])
        if ended and s in ended:
            f.attrs[("track", TRACKS_ENDED)] = ended[s]
        f = zones(f)
        events += f.attrs.get((zones.name, EVENTS), [])
        frames.append(f)
    return events, frames


def path(points: list[tuple[float, float]]) -> list[list[float]]:
    return [box_at(x, y) for x, y in points]


def crossings(events: list[dict]) -> list[tuple[int, str]]:
    return [(e["track_id"], e["direction"]) for e in events if e["event"] == "line_cross"]


def test_a_crossing_counts_once_in_its_direction_with_the_exact_event_fields() -> None:
    with Zones(lines=LINE, min_frames=2) as z:
        events, _ = run(z, {7: path([(200, y) for y in range(100, 220, 10)])})
    assert crossings(events) == [(7, "in")]
    e = events[0]
    assert list(e) == ["event", "line", "track_id", "label", "direction", "source", "seq", "pts_time"]
    # anchors within 7.5 px of the line (0.015 of the 500 px diagonal) count for neither side; from
    # y = 160 (frame 6) the anchor is on the far side: the second frame there (y = 170, frame 7) counts
    assert (e["label"], e["source"], e["seq"], e["pts_time"]) == ("person", "cam", 7, 0.7)
    assert z.counters()["lines"] == {"door": {"in": {"person": 1}, "out": {}}}


def test_jitter_on_the_line_never_double_counts() -> None:
    ys = [100, 120, 140] + [148, 152, 147, 153, 149, 151, 146, 154] * 3 + [175, 185, 195, 205]
    with Zones(lines=LINE, min_frames=2) as z:
        events, _ = run(z, {1: path([(200, y) for y in ys])})
    assert crossings(events) == [(1, "in")]
    # anchors that jump across without the box touching the line still need min_frames to count
    ys = [100, 110, 120, 200, 110, 200, 110, 120, 200, 210, 220]
    with Zones(lines=LINE, min_frames=3) as z:
        events, _ = run(z, {1: path([(200, y) for y in ys])})
    assert crossings(events) == [(1, "in")]


def test_with_trigger_box_frames_where_the_box_straddles_the_line_do_not_count() -> None:
    # a tall box whose anchor dips below the line but whose top stays above it: never clear of the line
    tall = [[190, 120, 210, y] for y in (140, 155, 160, 165, 170, 175, 180)]
    with Zones(lines=LINE, min_frames=2, trigger="box") as z:
        events, _ = run(z, {1: tall})
    assert crossings(events) == []
    with Zones(lines=LINE, min_frames=2, trigger="box") as z:  # clear of the line on both sides: counts
        events, _ = run(z, {1: path([(200, y) for y in range(100, 220, 10)])})
    assert [(e["track_id"], e["seq"]) for e in events] == [(1, 10)]  # clear below from y = 190 (frame 9)


def test_with_trigger_box_a_box_across_the_line_beyond_an_end_is_on_neither_side() -> None:
    # a tall box walking down and right past the end B = (300, 150): its feet cross y = 150 at x = 265,
    # within the segment, while its top stays above the line until y = 250
    walk = [(220, 110), (240, 130), (265, 150), (290, 170), (315, 190), (330, 200), (345, 210)]
    tall = [[x - 10, y - 100, x + 10, y] for x, y in walk]
    with Zones(lines=LINE, min_frames=2, trigger="box") as z:
        events, _ = run(z, {1: tall})
    assert crossings(events) == []
    clear = tall + [[x - 10, y - 100, x + 10, y] for x, y in [(350, 255), (352, 265), (354, 275), (356, 285)]]
    with Zones(lines=LINE, min_frames=2, trigger="box") as z:
        events, _ = run(z, {1: clear})
    assert [(e["track_id"], e["direction"], e["seq"]) for e in events] == [(1, "in", 8)]  # clear from frame 7


def test_an_object_larger_than_its_way_past_the_line_is_counted_by_its_anchor() -> None:
    # people seen close up: boxes 200 px tall, never clear of the line; their feet cross it
    big = [[190, y - 200, 210, y] for y in range(110, 300, 15)]
    with Zones(lines=LINE, min_frames=2) as z:
        events, _ = run(z, {1: big})
    assert crossings(events) == [(1, "in")]
    with Zones(lines=LINE, min_frames=2, trigger="box") as z:
        events, _ = run(z, {1: big})
    assert crossings(events) == []


def test_anchors_within_the_margin_count_for_neither_side() -> None:
    wobble = [100, 120] + [144, 156, 145, 155] * 4 + [120, 100]  # standing on the line, +-6 px
    with Zones(lines=LINE, min_frames=1) as z:  # margin 0.015 of the diagonal: 7.5 px
        events, _ = run(z, {1: path([(200, y) for y in wobble])})
    assert crossings(events) == []
    with Zones(lines=LINE, min_frames=1, margin=0.0) as z:
        events, _ = run(z, {1: path([(200, y) for y in wobble])})
    assert len(crossings(events)) >= 8  # without a margin, every step across counts
    with Zones(lines={"door": {"points": [[100, 150], [300, 150]]}}, units="px", margin=7, min_frames=1) as z:
        events, _ = run(z, {1: path([(200, y) for y in wobble])})
    assert crossings(events) == []


def test_back_and_forth_counts_each_real_crossing_and_nothing_for_a_short_visit() -> None:
    down_up = [100, 120, 190, 200, 210, 120, 110, 100]
    with Zones(lines=LINE, min_frames=2) as z:
        events, _ = run(z, {1: path([(200, y) for y in down_up])})
    assert crossings(events) == [(1, "in"), (1, "out")]
    visit = [100, 120, 190, 120, 110, 100]  # one frame on the far side
    with Zones(lines=LINE, min_frames=2) as z:
        events, _ = run(z, {1: path([(200, y) for y in visit])})
    assert crossings(events) == []


def test_crossings_outside_the_segments_ends_do_not_count() -> None:
    with Zones(lines=LINE, min_frames=2) as z:  # the segment spans x = 100..300
        events, _ = run(z, {1: path([(50, y) for y in range(100, 220, 10)]),
                            2: path([(350, y) for y in range(220, 100, -10)]),
                            3: path([(x, 100 + 10 * k) for k, x in enumerate(range(20, 260, 20))])})
    # 1 and 2 pass beyond the ends; 3 walks diagonally and passes through the segment
    assert crossings(events) == [(3, "in")]


def test_a_crossing_counts_where_the_anchor_went_across_not_where_it_left_the_margin() -> None:
    # close to the line (within the 7.5 px margin) inside the segment, along it on the near side,
    # then across it at x = 355, beyond the end B = (300, 150)
    along = [(200, 130), (210, 140)] + [(x, 146) for x in range(220, 360, 10)]
    with Zones(lines=LINE, min_frames=2) as z:
        events, _ = run(z, {1: path(along + [(360, 165), (365, 175), (370, 185)])})
    assert crossings(events) == []
    with Zones(lines=LINE, min_frames=2) as z:  # the same, going across at x = 285: through the segment
        events, _ = run(z, {1: path(along[:9] + [(285, 165), (285, 175), (285, 185)])})
    assert crossings(events) == [(1, "in")]


def test_predicted_boxes_hold_a_crossing_or_a_zone_change_until_a_detection_confirms_it() -> None:
    # detection on every 4th frame; the tracker's predictions carry the object on past the line
    # (y = 150) and into the lower zone while it has in fact stopped at y = 140
    ys = [100, 110, 120, 130, 140, 160, 170, 180, 140, 150, 160, 170, 140]
    predicted = {s for s in range(len(ys)) if s % 4}
    zone = {"low": {"points": [[0, 0.5], [1, 0.5], [1, 1], [0, 1]]}}
    with Zones(lines=LINE, zones=zone, min_frames=2, inertia=2) as z:
        events, _ = run(z, {1: path([(200, y) for y in ys])}, predicted=predicted)
    assert events == []
    # detected on the far side at frame 8: the crossing counts there, and the zone entry too
    ys = [100, 110, 120, 130, 140, 160, 170, 180, 190, 200]
    with Zones(lines=LINE, zones=zone, min_frames=2, inertia=2) as z:
        events, _ = run(z, {1: path([(200, y) for y in ys])}, predicted={s for s in range(len(ys)) if s % 4})
    assert [(e["event"], e["direction"], e["seq"]) for e in events] == [("zone_enter", "in", 8),
                                                                         ("line_cross", "in", 8)]


def test_two_objects_crossing_together_are_both_counted() -> None:
    with Zones(lines=LINE, min_frames=2) as z:
        events, _ = run(z, {4: path([(180, y) for y in range(100, 220, 10)]),
                            5: path([(205, y) for y in range(100, 220, 10)])},
                        labels={4: "person", 5: "bike"})
    assert sorted(crossings(events)) == [(4, "in"), (5, "in")]
    assert z.counters()["lines"]["door"]["in"] == {"bike": 1, "person": 1}


def test_line_label_filter_and_pixel_units() -> None:
    lines = {"door": {"points": [[100, 150], [300, 150]], "labels": ["bike"]}}
    with Zones(lines=lines, units="px", min_frames=2) as z:
        events, _ = run(z, {4: path([(180, y) for y in range(100, 220, 10)]),
                            5: path([(205, y) for y in range(220, 100, -10)])},
                        labels={4: "person", 5: "bike"})
    assert crossings(events) == [(5, "out")]


def test_a_label_filter_that_matches_nothing_says_which_labels_came(caplog: pytest.LogCaptureFixture) -> None:
    """Each line and zone on its own: another's match does not hide a misspelt label."""
    lines = {"door": {"points": [[100, 150], [300, 150]], "labels": ["persn"]},
             "gate": {"points": [[100, 170], [300, 170]], "labels": ["person"]}}
    with caplog.at_level("WARNING", logger="vapipe"):
        with Zones(lines=lines, units="px", min_frames=2, name="counting") as z:
            events, _ = run(z, {4: path([(180, y) for y in range(100, 220, 10)])}, labels={4: "person"})
    assert crossings(events) == [(4, "in")] and [r.getMessage() for r in caplog.records] == [
        "stage 'counting': no object labelled 'persn' reached it (lines.door.labels: ['persn']); objects that "
        "did: person"]


SQUARE = {"room": {"points": [[0.25, 0.25], [0.75, 0.25], [0.75, 0.75], [0.25, 0.75]]}}


def test_zone_enter_and_exit_after_inertia_with_occupancy_and_dwell() -> None:
    inside, outside = (200, 150), (20, 150)
    seq = [outside] * 2 + [inside, outside] * 2 + [inside] * 10 + [outside, inside] + [outside] * 4
    with Zones(zones=SQUARE, inertia=3) as z:
        events, frames = run(z, {1: path(seq), 2: path([inside] * 8)}, labels={2: "cat"})
    kinds = [(e["event"], e["track_id"], e["direction"], e["seq"]) for e in events]
    # track 1 flickers at the edge (no event), then is inside from frame 6: enters at frame 8;
    # leaves from frame 18 for good (the single outside frame 16 is absorbed): exits at frame 20
    assert kinds == [("zone_enter", 2, "in", 2), ("zone_enter", 1, "in", 8), ("zone_exit", 1, "out", 20)]
    assert frames[10].attrs[(z.name, RECORD)] == {"occupancy": {"room": {"person": 1, "cat": 1}}}
    assert frames[20].attrs[(z.name, RECORD)] == {"occupancy": {"room": {"cat": 1}}}
    # dwell: from the first frame of the run that made it enter (frame 6, 0.1 s per frame)
    dwell = {int(t): a["zones"]["room"] for t, a in zip(frames[7].detections.track_id, frames[7].detections.attributes)
             if "zones" in a}
    assert dwell == {2: pytest.approx(0.7)}  # track 1 has not entered yet at frame 7
    dwell = [a["zones"]["room"] for a in frames[12].detections.attributes if "zones" in a]
    assert dwell == [pytest.approx(0.6)]
    assert z.counters()["zones"]["room"] == {"enter": {"cat": 1, "person": 1}, "exit": {"person": 1}}


def test_an_anchor_on_the_frames_edge_is_inside_a_zone_drawn_to_the_edge() -> None:
    frame = {"all": {"points": [[0, 0], [1, 0], [1, 1], [0, 1]]}}
    with Zones(zones=frame, inertia=1) as z:  # boxes clipped to the frame: the bottom centre is at y = H
        events, _ = run(z, {1: path([(200, H)] * 3)})
    assert [e["event"] for e in events] == ["zone_enter"]


def test_an_object_that_leaves_the_picture_exits_before_its_track_ends() -> None:
    right = {"right": {"points": [[0.5, 0], [1, 0], [1, 1], [0.5, 1]]}}
    leaving = path([(x, 200) for x in range(300, 400, 20)]) + [[380, 170, 400, 200]] + [None] * 6
    hidden = path([(300, 200)] * 6) + [None] * 6  # occluded in the middle of the picture
    with Zones(zones=right, inertia=3) as z:
        events, _ = run(z, {1: leaving, 2: hidden})
    # 1 enters at frame 2, is last seen touching the right edge at frame 5 and missing from frame 6
    assert [(e["event"], e["track_id"], e["seq"]) for e in events] == [
        ("zone_enter", 1, 2), ("zone_enter", 2, 2), ("zone_exit", 1, 8)]


def test_counts_follow_the_label_a_track_has_had_most_often() -> None:
    flicker = ["cell phone", "car", "cell phone", "cell phone", "suitcase", "cell phone", "car", "cell phone"]
    zone = {"room": {"points": [[0.25, 0.25], [0.75, 0.25], [0.75, 0.75], [0.25, 0.75]]}}
    cars = {"cars": {"points": zone["room"]["points"], "labels": ["car"]}}
    with Zones(zones={**zone, **cars}, inertia=1) as z:
        for s, label in enumerate(flicker + ["car"] * 2):
            f = Frame.from_image(IMAGE, "cam", s)
            y = 150 if s < 8 else 290  # inside for 8 frames, then out
            f.detections = Detections(xyxy=[box_at(200, y)], score=[0.9], label=[label], track_id=[1])
            z(f)
    counts = z.counters()["zones"]
    assert counts["room"] == {"enter": {"cell phone": 1}, "exit": {"cell phone": 1}}
    assert counts["cars"] == {"enter": {}, "exit": {}}  # never mostly a car


def test_a_track_that_ends_inside_a_zone_exits() -> None:
    with Zones(zones=SQUARE, inertia=2) as z:
        events, _ = run(z, {3: path([(200, 150)] * 4) + [None] * 3}, ended={6: [3]})
    assert [(e["event"], e["seq"]) for e in events] == [("zone_enter", 1), ("zone_exit", 6)]


def test_untracked_objects_are_ignored() -> None:
    with Zones(lines=LINE) as z:
        f = Frame.from_image(IMAGE, "cam", 0)
        f.detections = Detections(xyxy=[box_at(200, 100)], score=[0.9], label=["person"])
        assert z(f).attrs.get((z.name, EVENTS)) is None


def test_zones_and_lines_are_drawn_with_live_counts() -> None:
    with Zones(zones=SQUARE, lines=LINE) as z:
        _, frames = run(z, {1: path([(200, y) for y in range(100, 220, 10)])})
    texts = [s.text for s in frames[-1].attrs[(z.name, OVERLAY)] if s.text]
    assert texts == ["room: 1 now, 1 entered", "door: in 1 out 0"]
    from stages.annotate import draw_shapes

    image = draw_shapes(IMAGE.copy(), frames[-1].attrs[(z.name, OVERLAY)])
    assert (image[H // 2, W // 2 - 30] == (255, 255, 0)).all()  # the line, in its colour


def test_events_and_occupancy_reach_the_json_lines(tmp_path: Path) -> None:
    with Zones(zones=SQUARE, lines=LINE) as z, Metadata(path=str(tmp_path / "out.jsonl")) as meta:
        z.source_id = meta.source_id = "cam"
        for s, y in enumerate(range(100, 220, 10)):
            f = Frame.from_image(IMAGE, "cam", s, pts=s, time_base=Fraction(1, 10))
            f.detections = Detections(xyxy=[box_at(200, y)], score=[0.9], label=["person"], track_id=[1])
            meta(z(f))
    lines = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    events = [x for x in lines if "event" in x]
    records = [x for x in lines if "objects" in x]
    assert [e["event"] for e in events] == ["zone_enter", "line_cross"]
    assert records[-1]["occupancy"] == {"room": {"person": 1}}
    assert lines.index(events[0]) == lines.index(records[events[0]["seq"]]) + 1  # right after its frame


@pytest.mark.parametrize("params, message", [
    ({"zones": {"a": {"points": [[0, 0], [1, 1]]}}}, r"'zones.a.points': a polygon needs at least 3 points, got 2"),
    ({"zones": {"a": {"points": [[0, 0], [1, 1], [1, 0], [0, 1]]}}}, r"'zones.a.points': the polygon intersects "
     r"itself \(edge 0-1 crosses edge 2-3\)"),
    ({"zones": {"a": {"points": [[0.1, 0.3], [0.2, 0.6], [0.3, 0.9]]}}}, r"'zones.a.points': the polygon has no area"),
    ({"lines": {"l": {"points": [[0.5, 0.5], [0.5, 0.5]]}}}, r"'lines.l.points': the line has zero length"),
    ({"lines": {"l": {"points": [[0.5, 0.5], [1.5, 0.5]]}}}, r"lines.l.points\[1\] = \[1.5, 0.5\] is outside the "
     r"frame \(fractions must be in \[0, 1\]; for pixels set units: px\)"),
    ({}, r"give at least one of 'zones' or 'lines'"),
])
def test_bad_geometry_is_a_one_line_error_naming_stage_and_field(params: dict, message: str) -> None:
    text = "pipelines:\n  p:\n    stages:\n      - {name: decode, type: decode}\n" \
           f"      - {{name: counting, type: zones, params: {json.dumps(params)}}}\n"
    with pytest.raises(ConfigError, match=r"^p.yaml:5: pipeline 'p' stage 'counting': .*" + message) as info:
        parse_config(text, "p.yaml", check_files=False)
    assert "\n" not in str(info.value)


def test_pixel_coordinates_outside_the_frame_fail_on_the_first_frame() -> None:
    with Zones(lines={"l": {"points": [[10, 10], [500, 10]]}}, units="px") as z:
        with pytest.raises(ValueError, match=r"^lines.l.points\[1\] = \[500, 10\] is outside the frame "
                                             r"\(the frame is 400x300 px\)$"):
            z(Frame.from_image(IMAGE, "cam", 0))


def test_geometry_follows_the_frame_when_a_source_changes_size() -> None:
    """A zone over the right half, in fractions: an object at x = 260 is inside it on a 400 px
    frame and outside on an 800 px one (a camera that switched resolution)."""
    zones = Zones(zones={"right": {"points": [[0.5, 0], [1, 0], [1, 1], [0.5, 1]]}}, inertia=1)
    inside = []
    for s, width in enumerate([400] * 3 + [800] * 3):
        f = Frame.from_image(np.zeros((H, width, 3), np.uint8), "cam", s, pts=s, time_base=Fraction(1, 10))
        f.detections = Detections(xyxy=[box_at(260, 200)], score=[0.9], label="person", track_id=[1])
        inside.append(zones(f).attrs[(zones.name, RECORD)]["occupancy"]["right"].get("person", 0))
    assert inside == [1, 1, 1, 0, 0, 0]
