"""Ratios and targets of a bench result."""

from __future__ import annotations

from bench.targets import evaluate


def _result(**modes: dict) -> dict:
    return {"modes": modes, "peers": {}}


def test_ratios_limit_and_checks() -> None:
    res = _result(naive={"fps": 50.0}, **{"hand-tuned": {"fps": 80.0}}, vapipe={"fps": 100.0, "cpu_util": 0.95},
                  **{"vapipe-unplanned": {"fps": 110.0}, "decode-alone": {"fps": 300.0},
                     "infer-alone": {"fps": 150.0}, "vapipe-r2": {"fps": 90.0}})
    out = evaluate(res)
    assert out["limit_fps"] == 100.0
    assert out["ratios"] == {"vapipe/naive": 2.0, "vapipe/hand-tuned": 1.25, "vapipe/vapipe-unplanned": 0.909,
                             "vapipe/limit": 1.0}   # no ratio to the sweep or to the limits' parts
    checks = {c["check"]: c["ok"] for c in out["checks"]}
    assert checks == {"vapipe/naive >= 1.3": True, "vapipe/hand-tuned >= 1.2": True, "vapipe/limit >= 0.9": True,
                      "vapipe/vapipe-unplanned >= 1.0": False, "vapipe CPU >= 90% of the cores": True}


def test_peer_target_accuracy_and_camera_spread() -> None:
    res = _result(vapipe={"fps": 10.0, "cpu_util": 0.5, "fps_per_camera": [3.0, 2.5, 2.0, 2.5]},
                  rapidocr={"fps": 4.0})
    res["peers"] = {"rapidocr": {}}
    res["accuracy"] = {"vapipe": {"accuracy": 0.97}, "rapidocr": {"accuracy": 0.95}}
    out = evaluate(res)
    checks = {c["check"]: (c["value"], c["ok"]) for c in out["checks"]}
    assert checks["vapipe/rapidocr >= 3.0"] == (2.5, False)
    assert checks["vapipe lines read >= rapidocr's (95.0%)"] == (0.97, True)
    assert checks["vapipe CPU >= 90% of the cores"] == (0.5, False)
    assert checks["vapipe per-camera FPS spread <= 10%"] == (0.333, False)
    assert "limit_fps" not in out


def test_engine_mode_is_a_ratio_to_vapipe_without_a_target() -> None:
    out = evaluate(_result(naive={"fps": 5.0}, vapipe={"fps": 10.0}, **{"vapipe-ort": {"fps": 8.0}}))
    assert out["ratios"] == {"vapipe/naive": 2.0, "vapipe-ort/vapipe": 0.8}
    assert not any("vapipe-ort" in c["check"] for c in out["checks"])


def test_the_work_bound_is_the_cores_over_the_cpu_time_vapipe_spent_per_frame() -> None:
    from bench.report import format_table
    from bench.vapipe_modes import work_per_frame

    # a plan check's observation of 2 cameras: one decoder not measurable, 2 face crops per frame
    observed = {"decode_ms": [2.0, None], "host_ms": 2.0, "infer_ms": {"detect": 1.0, "landmarks": 1.5},
                "per_frame": {"detect": 1.0, "landmarks": 2.0}}
    work = work_per_frame(observed)
    assert work == {"decode": 2.0, "host": 2.0, "models": 4.0}
    assert work_per_frame(None) is None and work_per_frame({"decode_ms": [None], "host_ms": 1.0}) is None
    res = _result(vapipe={"fps": 200.0, "work_ms": work}, **{"decode-alone": {"fps": 1000.0, "cpu_util": 0.8},
                                                            "infer-alone": {"fps": 500.0}})
    res["cores"] = 2
    out = evaluate(res)
    assert out["work_bound_fps"] == 250.0   # 2 cores x 1000 / 8 ms
    assert out["ratios"]["vapipe/work-bound"] == 0.8 and out["ratios"]["vapipe/limit"] == 0.6
    assert not any("work" in c["check"] for c in out["checks"])   # an explanation, not a target
    res.update(out, pipeline="faces", source="clip.mp4", width=1280, height=720, cameras=1, frames=10, rounds=1)
    res["modes"]["vapipe"].update(rounds=[200.0])
    res["modes"]["infer-alone"].update(rounds=[500.0])
    res["modes"]["decode-alone"].update(rounds=[1000.0])
    line = next(x for x in format_table(res).splitlines() if x.startswith("work-bound"))
    assert "250.0" in line and "decode 2.00 + host 2.00 + models 4.00 = 8.00 ms" in line
    assert line.endswith("(decode-alone 1.60 ms CPU per frame)")   # 0.8 x 2 cores / 1000 fps; infer-alone: no CPU


def test_a_ratio_is_the_median_of_the_rounds_own_ratios() -> None:
    # the machine drifts: every mode runs twice as fast in round 3 as in round 1
    res = _result(vapipe={"fps": 150.0, "rounds": [100.0, 150.0, 200.0]},
                  naive={"fps": 105.0, "rounds": [70.0, 105.0, 140.0]},
                  **{"vapipe-unplanned": {"fps": 140.0, "rounds": [95.0, 140.0, 190.0]},
                     "decode-alone": {"fps": 300.0, "rounds": [200.0, 300.0, 400.0]},
                     "infer-alone": {"fps": 300.0, "rounds": [200.0, 300.0, 400.0]},
                     "hand-tuned": {"fps": 120.0, "rounds": [120.0, 90.0]}})   # a round missing
    out = evaluate(res)
    assert out["ratio_rounds"]["vapipe/naive"] == [1.429, 1.429, 1.429]
    assert out["ratios"]["vapipe/naive"] == 1.429 and out["ratios_of_medians"]["vapipe/naive"] == 1.429
    # rounds 1.053, 1.071, 1.053: the median of those, where the medians' ratio is 1.071
    assert out["ratios"]["vapipe/vapipe-unplanned"] == 1.053
    assert out["ratios_of_medians"]["vapipe/vapipe-unplanned"] == 1.071
    # the limit of each round: 100, 150, 200 fps
    assert out["ratio_rounds"]["vapipe/limit"] == [1.0, 1.0, 1.0]
    # without every round of both, the ratio of the medians
    assert out["ratios"]["vapipe/hand-tuned"] == 1.25 and "vapipe/hand-tuned" not in out["ratio_rounds"]
    checks = {c["check"]: (c["value"], c["ok"]) for c in out["checks"]}
    assert checks["vapipe/vapipe-unplanned >= 1.0"] == (1.053, True)
