from __future__ import annotations

import numpy as np
import pytest

from pipeline.frame import DETECTION_RAN, STILL, TRACKS_ENDED, Detections, Frame
from stages.track import Track

IMAGE = np.zeros((240, 320, 3), np.uint8)


def frame(seq: int, boxes: list[list[float]], labels: list[str] | None = None, scores: list[float] | None = None,
          detected: bool | None = True, source: str = "cam", keypoints: list | None = None) -> Frame:
    f = Frame.from_image(IMAGE, source, seq)
    f.detections = Detections(xyxy=np.array(boxes, np.float32).reshape(-1, 4),
                              score=scores if scores is not None else [0.9] * len(boxes),
                              label=labels if labels is not None else ["car"] * len(boxes), keypoints=keypoints)
    if detected is not None:
        f.attrs[("detector", DETECTION_RAN)] = detected
    return f


def moving(seq: int, x0: float = 20, speed: float = 2, y: float = 50, size: float = 40) -> list[float]:
    x = x0 + speed * seq
    return [x, y, x + size, y + size]


def test_ids_start_at_one_after_min_hits_and_unmatched_detections_are_kept_or_dropped() -> None:
    with Track(min_hits=3) as t:
        ids = [t(frame(s, [moving(s), moving(s, x0=200, speed=-2)])).detections.track_id.tolist()
               for s in range(5)]
    assert ids == [[-1, -1], [-1, -1], [1, 2], [1, 2], [1, 2]]
    with Track(min_hits=2, unmatched="drop") as t:
        counts = [len(t(frame(s, [moving(s)])).detections) for s in range(3)]
    assert counts == [0, 1, 1]


def test_frames_without_detection_carry_every_tracked_object_at_its_predicted_box() -> None:
    kp = lambda s: [np.array([[moving(s)[0] + 20, 60.0]], np.float32)]  # noqa: E731 - a point inside the box
    with Track() as t:
        for s in range(12):
            t(frame(s, [moving(s)], keypoints=kp(s)))
        out = t(frame(12, [], detected=False)).detections
        later = t(frame(13, [], detected=False)).detections
    assert out.track_id.tolist() == [1] and out.attributes[0]["predicted"] is True
    assert np.allclose(out.xyxy[0], moving(12), atol=1.0)   # 2 px/frame learnt
    assert np.allclose(later.xyxy[0], moving(13), atol=1.0)
    assert np.allclose(out.keypoints[0], [[moving(12)[0] + 20, 60]], atol=1.0)


def test_still_frames_hold_boxes_and_lost_tracks_age_through_them() -> None:
    with Track(lost_frames=5) as t:
        for s in range(6):
            t(frame(s, [moving(s)]))
        held = []
        for s in range(6, 30):  # nothing moves: detection skipped, boxes held
            f = frame(s, [], detected=False)
            f.attrs[("motion", STILL)] = True
            held.append(t(f).detections.xyxy[0].copy())
        assert np.allclose(held[0], held[-1])
        for s in range(30, 33):  # detector sees nothing: lost, but ids survive 5 frames
            t(frame(s, []))
        back = t(frame(33, [held[-1].tolist()])).detections
        assert back.track_id.tolist() == [1]
        t(frame(34, []))  # gone (it walked out): lost
        ended = []
        for s in range(35, 45):  # an empty, still scene: the lost track's buffer runs out all the same
            f = frame(s, [], detected=False)
            f.attrs[("motion", STILL)] = True
            ended += [(s, t(f).attrs.get((t.name, TRACKS_ENDED)))]
        newcomer = [t(frame(s, [held[-1].tolist()])).detections.track_id.tolist() for s in (45, 46)]
    assert [e for e in ended if e[1]] == [(39, [1])]  # unseen since 33: more than 5 frames at 39
    assert newcomer == [[-1], [2]]  # someone else at the same place gets a new id


def test_a_lost_track_is_found_again_within_its_buffer_and_ends_after_it() -> None:
    with Track(lost_frames=4) as t:
        for s in range(5):
            t(frame(s, [moving(s)]))
        for s in range(5, 8):
            assert len(t(frame(s, [])).detections) == 0  # lost tracks are not output
        assert t(frame(8, [moving(8)])).detections.track_id.tolist() == [1]
        ended_at = None
        for s in range(9, 20):
            f = t(frame(s, []))
            if (t.name, TRACKS_ENDED) in f.attrs:
                ended_at = (s, f.attrs[(t.name, TRACKS_ENDED)])
                break
        ids = [t(frame(s, [moving(s)])).detections.track_id.tolist() for s in range(30, 33)]
    assert ended_at == (13, [1])  # last seen at 8, unseen for more than 4 frames at 13
    assert ids == [[-1], [2], [2]]


def test_per_class_tracks_never_take_another_labels_detection() -> None:
    for per_class, want in ((True, [[1], [-1], [2]]), (False, [[1], [1], [1]])):
        with Track(per_class=per_class) as t:
            t(frame(0, [moving(0)], ["car"]))
            got = [t(frame(1, [moving(1)], ["car"])).detections.track_id.tolist(),
                   t(frame(2, [moving(2)], ["bus"])).detections.track_id.tolist(),
                   t(frame(3, [moving(3)], ["bus"])).detections.track_id.tolist()]
        assert got == want, per_class


def test_by_default_a_track_follows_its_object_through_a_label_flicker() -> None:
    labels = ["car", "car", "cell phone", "car", "truck", "truck", "car"]
    with Track() as t:
        ids = [t(frame(s, [moving(s)], [label])).detections.track_id.tolist() for s, label in enumerate(labels)]
    assert ids == [[-1], [1], [1], [1], [1], [1], [1]]


def test_a_box_of_the_tracks_own_label_is_preferred_to_a_slightly_closer_one() -> None:
    # a standing person's track; then a bicycle box right on it and a person box 1 px off (IoU 0.95)
    with Track() as t:
        for s in range(3):
            t(frame(s, [moving(s, speed=0)], ["person"]))
        x = moving(3, speed=0)
        got = t(frame(3, [x, [x[0] + 1, x[1], x[2] + 1, x[3]]], ["bicycle", "person"]))
    assert got.detections.label.tolist() == ["bicycle", "person"]
    assert got.detections.track_id.tolist() == [-1, 1]
    # without the preference the bicycle box, which overlaps the prediction most, would take the id
    assert t.params.per_class is False


def test_weak_detections_continue_tracks_but_never_start_them() -> None:
    with Track() as t:
        ids = [t(frame(s, [moving(s), moving(s, x0=200)], scores=[0.9, 0.3])).detections.track_id.tolist()
               for s in range(3)]
        ids.append(t(frame(3, [moving(3)], scores=[0.3])).detections.track_id.tolist())
    assert ids == [[-1, -1], [1, -1], [1, -1], [1]]


def test_labels_filter_leaves_other_objects_untracked() -> None:
    with Track(labels=["person"]) as t:
        for s in range(3):
            out = t(frame(s, [moving(s), moving(s, x0=200)], ["person", "dog"])).detections
    assert out.track_id.tolist() == [1, -1]


def test_a_labels_filter_that_matches_nothing_says_which_labels_came(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="vapipe"):
        with Track(labels=["persn"], name="track") as t:
            for s in range(3):
                t(frame(s, [moving(s), moving(s, x0=200)], ["person", "dog"]))
        with Track(labels=["person"]) as t:
            for s in range(3):
                t(frame(s, [moving(s)], ["person"]))
    assert [r.getMessage() for r in caplog.records] == [
        "stage 'track': no object labelled 'persn' reached it (labels: ['persn']); objects that did: dog, person"]


def test_ids_are_per_source_and_user_detections_without_marks_count_as_detected() -> None:
    with Track() as t:
        for s in range(3):
            a = t(frame(s, [moving(s)], source="a", detected=None))
            b = t(frame(s, [moving(s, x0=100), moving(s, x0=200)], source="b", detected=None))
    assert a.detections.track_id.tolist() == [1] and b.detections.track_id.tolist() == [1, 2]
    assert t.counters() == {"ids": 3}


def test_lost_s_is_converted_with_the_source_rate() -> None:
    t = Track(lost_s=2.0)
    t.source_fps = 10.0
    assert t.config().lost_frames == 20


def test_bad_thresholds_are_one_line_errors() -> None:
    with pytest.raises(ValueError, match="low_score"):
        Track(low_score=0.6, high_score=0.5)


def test_tracks_not_yet_confirmed_appear_on_predicted_frames_only_with_unmatched_keep() -> None:
    for unmatched, want in (("keep", [[-1], [-1], [1]]), ("drop", [[], [], [1]])):
        with Track(unmatched=unmatched) as t:
            t(frame(0, [moving(0)]))
            got = [t(frame(1, [], detected=False)).detections.track_id.tolist(),
                   t(frame(2, [], detected=False)).detections.track_id.tolist(),
                   t(frame(3, [moving(3)])).detections.track_id.tolist()]
        assert got == want, unmatched


def test_a_second_box_on_a_matched_object_starts_no_track() -> None:
    for duplicate_iou, want in ((0.7, 1), (1.0, 2)):
        with Track(duplicate_iou=duplicate_iou) as t:
            for s in range(3):
                t(frame(s, [moving(s)]))
            for s in range(3, 7):  # the detector adds an overlapping box (IoU 0.82) on the same object
                box = moving(s)
                t(frame(s, [box, [box[0] + 2, box[1] + 2, box[2] + 2, box[3] + 2]]))
        assert t.counters()["ids"] == want, duplicate_iou


def test_after_a_motion_stage_a_missed_still_object_is_output_held_in_place() -> None:
    bottle = [100.0, 80, 140, 180]

    def watched(seq: int, boxes: list[list[float]], regions: list[list[float]]) -> Frame:
        f = frame(seq, boxes, labels=["bottle"] * len(boxes))
        f.attrs[("motion", "boxes")] = np.array(regions, np.float32).reshape(-1, 4)
        f.attrs[("motion", STILL)] = not regions
        return f

    with Track() as t:
        for s in range(3):
            t(watched(s, [bottle], []))
        missed = t(watched(3, [], [[250, 10, 300, 60]]))  # the detector missed it; a hand moved elsewhere
        assert missed.detections.track_id.tolist() == [1] and missed.detections.xyxy[0].tolist() == bottle
        assert missed.detections.attributes[0]["predicted"] is True
        taken = t(watched(4, [], [[95, 75, 150, 190]]))  # moved where it stood: taken away, not held
        assert len(taken.detections) == 0
    with Track() as t:  # without a motion stage a miss loses the track at once
        for s in range(3):
            t(frame(s, [bottle], labels=["bottle"]))
        assert len(t(frame(3, [], labels=[])).detections) == 0
