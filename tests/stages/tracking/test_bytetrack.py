"""The tracker on an object that leaves through the frame's edge."""

from __future__ import annotations

import numpy as np

from stages.tracking.bytetrack import ByteTracker, TrackerConfig

#: YOLO11n's boxes on a white car driving out through the bottom of ``car-detection.mp4``
#: (768x432), frames 324-346, as the planned runtime produced them: (label, score, x1, y1, x2, y2),
#: or None for a frame without a box.  From frame 334 the box is cut off at the frame's edge and
#: shrinks; frame 341 has no box; the label changes from "cell phone" to "car", and three
#: boxes after the gap are weak (below 0.5).
LEAVING = [
    ("cell phone", 0.48, 164, 2, 326, 171), ("cell phone", 0.67, 160, 1, 324, 190),
    ("cell phone", 0.59, 154, 1, 323, 219), ("cell phone", 0.70, 150, 1, 321, 236),
    ("cell phone", 0.36, 147, 1, 319, 258), ("cell phone", 0.45, 141, 3, 317, 287),
    ("cell phone", 0.30, 137, 15, 313, 311), ("cell phone", 0.54, 132, 34, 311, 345),
    ("cell phone", 0.69, 128, 52, 311, 371), ("cell phone", 0.70, 125, 64, 307, 396),
    ("cell phone", 0.50, 120, 90, 308, 427), ("cell phone", 0.62, 116, 105, 306, 428),
    ("cell phone", 0.80, 112, 129, 306, 428), ("cell phone", 0.87, 111, 146, 305, 428),
    ("cell phone", 0.69, 110, 165, 305, 427), ("cell phone", 0.82, 106, 193, 303, 427),
    ("cell phone", 0.34, 101, 214, 301, 428), None,
    ("car", 0.26, 114, 269, 297, 429), ("car", 0.40, 114, 288, 296, 429),
    ("car", 0.32, 111, 323, 297, 430), ("car", 0.72, 112, 347, 297, 430),
    ("car", 0.63, 118, 384, 290, 430),
]


def _track(bounds: tuple[float, float] | None, config: TrackerConfig | None = None) -> tuple[list[int], ByteTracker]:
    tracker = ByteTracker(config)
    ids = []
    for det in LEAVING:
        boxes = np.array([det[2:]], float) if det else np.zeros((0, 4))
        out, _ = tracker.update(boxes, [det[1]] if det else [], [det[0]] if det else [], bounds=bounds)
        ids += out.tolist()
    return ids, tracker


def test_an_object_leaving_through_the_edge_keeps_its_id_when_the_frame_size_is_known() -> None:
    ids, tracker = _track((768.0, 432.0))
    assert tracker.issued == 1 and set(ids) == {-1, 1}
    assert ids[-3:] == [1, 1, 1]  # the last boxes, weak and of another label, stay on the track
    # without the frame's size the predicted box runs on past the edge and overlaps the weak boxes after
    # the gap only just enough: at low_match_iou 0.6 the clipped box still takes them, the unclipped one not
    strict = TrackerConfig(low_match_iou=0.6)
    assert _track((768.0, 432.0), strict)[0][-5:-2] == [1, 1, 1]
    assert _track(None, strict)[0][-5:-2] == [-1, -1, -1]


def test_boxes_predicted_between_detections_stay_inside_the_frame() -> None:
    frame = (768.0, 432.0)
    clipped, unclipped = ByteTracker(), ByteTracker()
    for k in range(4):  # moving right 40 px per frame, the last box cut off at the right edge
        box = np.array([[560.0 + 40 * k, 100, 688 + 40 * k, 200]]).clip(0, 768)
        clipped.update(box, [0.9], ["car"], bounds=frame)
        unclipped.update(box, [0.9], ["car"])
    [inside], _ = clipped.predict(bounds=frame)
    [outside], _ = unclipped.predict()
    x1, y1, x2, y2 = inside.box
    assert 680 < x1 < x2 == 768 and 90 < y1 < y2 < 210
    assert outside.box[2] > 768 and np.allclose(outside.box[[0, 1, 3]], inside.box[[0, 1, 3]])
    gone, _ = clipped.predict(steps=10, bounds=frame)  # wholly outside now: not output, still tracked
    assert gone == [] and len(clipped.predict(bounds=(2000.0, 432.0))[0]) == 1


def test_a_still_object_the_detector_misses_where_nothing_moved_is_held() -> None:
    bottle = np.array([[300.0, 200, 340, 300]])
    elsewhere = np.array([[10.0, 10, 60, 60]])
    for motion, held_frames in ((elsewhere, 2), (np.zeros((0, 4)), 2), (bottle + 5, 0), (None, 0)):
        tracker = ByteTracker()
        for _ in range(3):
            tracker.update(bottle, [0.8], ["bottle"])
        kept = []
        for _ in range(3):  # missed on three detection frames in a row
            tracker.update(np.zeros((0, 4)), [], [], motion=motion)
            kept.append([(b.track_id, b.box.tolist()) for b in tracker.held_now])
        assert sum(1 for k in kept if k) == held_frames, (motion, kept)
        if held_frames:  # held where it was, under its id; the third miss loses it
            assert kept[:2] == [[(1, bottle[0].tolist())]] * 2 and kept[2] == []
            assert tracker.tracked() == []
        ids, _ = tracker.update(bottle, [0.8], ["bottle"])
        assert ids.tolist() == [1] and tracker.issued == 1  # found again: the same id either way



def test_a_second_box_on_a_tracked_object_never_takes_its_detections() -> None:
    """The pose detector's boxes on a person close to the camera (``one-by-one-person-detection.mp4``,
    frames 924-946 of ``people_counting``, as its JSON Lines give them): twice a second, larger box
    comes with the person's (IoU about 0.6, under ``duplicate_iou``) and starts a track; on the
    frames after, the one box that comes overlaps that track's box more than the person's own
    predicted box.  It must stay the person's: before, the second box's track took it, was
    confirmed, and the person had two ids (and entered a zone three times)."""
    frames = [
        [([151, 159, 694, 432], .62)], [([166, 168, 678, 432], .77)], [([198, 134, 649, 432], .84)],
        [([208, 114, 640, 432], .65), ([249, 83, 590, 424], .56)], [([221, 3, 647, 429], .68)],
        [([187, 85, 695, 432], .58)], [([198, 0, 679, 432], .72)],
        [([165, 0, 757, 432], .61), ([235, 66, 664, 432], .60)], [([199, 0, 726, 432], .62)],
        [([191, 0, 727, 432], .69)], [([179, 0, 742, 432], .81)], [([202, 0, 726, 432], .80)],
        [([250, 14, 655, 419], .83)], [([238, 12, 661, 432], .71), ([216, 0, 680, 402], .61)],
        [([204, 0, 681, 432], .76), ([150, 0, 735, 432], .59)], [([203, 0, 675, 432], .82), ([141, 0, 743, 432], .58)],
        [([199, 0, 685, 432], .91)], [([223, 0, 668, 432], .93)], [([222, 0, 670, 432], .96)],
    ]
    tracker = ByteTracker(TrackerConfig(min_hits=4))  # as people_counting
    ids = set()
    for dets in frames:
        got, _ = tracker.update(np.array([b for b, _ in dets], float), np.array([s for _, s in dets]),
                                ["person"] * len(dets), bounds=(768, 432))
        ids.update(got[got > 0].tolist())
    assert ids == {1} and tracker.issued == 1, (ids, tracker.issued)


def test_the_iou_threshold_holds_for_a_box_of_any_label() -> None:
    """A still car, then a box 25 px off (IoU 0.23 with its track's box, ``match_iou`` 0.2) or a weak
    one 12 px off (IoU 0.54, ``low_match_iou`` 0.5), labelled car or truck: another label's box
    matches at the same IoU as one of the track's own (its label only ranks the candidates); with
    ``per_class`` the truck is another object."""
    car = np.array([[20.0, 50, 60, 90]])
    cases = [  # (per_class, label, score and shift of the box after the car, ids per frame)
        (False, "car", 0.9, 25, [[-1], [1], [1], [1], [1]]),
        (False, "truck", 0.9, 25, [[-1], [1], [1], [1], [1]]),
        (False, "car", 0.3, 12, [[-1], [1], [1], [1], [1]]),
        (False, "truck", 0.3, 12, [[-1], [1], [1], [1], [1]]),
        (True, "truck", 0.9, 25, [[-1], [1], [1], [-1], [2]]),
        (True, "truck", 0.3, 12, [[-1], [1], [1], [-1], [-1]]),
    ]
    for per_class, label, score, shift, want in cases:
        tracker = ByteTracker(TrackerConfig(per_class=per_class))
        ids = [tracker.update(car, [0.9], ["car"])[0].tolist() for _ in range(3)]
        ids.append(tracker.update(car + [shift, 0, shift, 0], [score], [label])[0].tolist())
        ids.append(tracker.update(car + [shift + 2, 0, shift + 2, 0], [0.9], [label])[0].tolist())
        assert ids == want, (per_class, label, score, ids)


def test_a_lost_track_ages_by_the_whole_gap_in_the_frame_sequence() -> None:
    """Lost at the 4th frame, with ``lost_frames`` 500: a gap of 400 frames (beyond the filter's
    ``MAX_STEPS``) keeps the track, one of 1000 ends it, whether the frame after the gap is a
    detection frame, a frame without detection or a still one."""
    box = np.array([[100.0, 100, 140, 140]])
    none = np.zeros((0, 4))
    for gap, ended, back in ((400, [], [1]), (1000, [1], [-1])):
        for way in ("update", "predict", "still"):
            tracker = ByteTracker(TrackerConfig(lost_frames=500))
            ids = [tracker.update(box, [0.9], ["car"])[0].tolist() for _ in range(3)]
            ids.append(tracker.update(none, [], [])[0].tolist())
            if way == "update":
                gone = tracker.update(none, [], [], steps=gap)[1]
            else:
                gone = tracker.predict(steps=gap, still=way == "still")[1]
            ids.append(tracker.update(box, [0.9], ["car"])[0].tolist())
            assert (ids, gone) == ([[-1], [1], [1], [], back], ended), (gap, way, ids, gone)
