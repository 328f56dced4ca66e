"""The runtime's check of the thread plan: judged on observed counters, re-planned safely."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pipeline import plan_check, run_counters
from pipeline.plan_check import PlanCheck
from pipeline.run_counters import Snapshot
from pipeline.planner import InferInfo, plan_threads
from pipeline.queues import BoundedQueue

ROOT = Path(__file__).resolve().parents[2]


class _Stage:
    def __init__(self) -> None:
        self.params = SimpleNamespace(config={"INFERENCE_PRECISION_HINT": "f32"})
        self.inferences = 0
        self.updates: list[dict[str, Any]] = []

    def reconfigure(self, update: dict[str, Any]) -> None:
        self.updates.append(update)


def _camera() -> SimpleNamespace:
    return SimpleNamespace(source=SimpleNamespace(live=False, params=SimpleNamespace(realtime=False)),
                           opts=SimpleNamespace(capture_delay_ms=0.0), frames=BoundedQueue(4, "block", threading.Event()),
                           stats=SimpleNamespace(decoded=0, processed=0), stages={"person_detect": _Stage()},
                           native_ids={"read": 101, "decode": 102, "work": 103})


def _counters(decoded: int, processed: int, put_wait: float, get_wait: float, inferences: int) -> dict[str, Any]:
    return {"decoded": decoded, "processed": processed, "put_wait_s": put_wait, "get_wait_s": get_wait,
            "inferences": {"person_detect": inferences}}


def _check(ms: float, replan: bool) -> tuple[PlanCheck, SimpleNamespace]:
    """A plan made from a wrong cost (``ms`` per inference) on 2 cores, and its check."""
    plan = plan_threads(2, 1, [InferInfo("person_detect", ms=ms, per_frame=1.0, origin="measured")],
                        decode_ms=3.6, host_ms=0.6)
    cam = _camera()
    return PlanCheck(plan, [cam], pipeline="persons", uris=["clip.mp4"], replan=replan), cam


def _window(cpu_s: float, machine_s: float, put_wait: float, get_wait: float, frames: int = 500,
            infer_cpu_s: float = 10.0) -> tuple[Snapshot, Snapshot]:
    """10 s in which ``frames`` frames went through; the decoder and worker threads used 3 and 1 s."""
    base = Snapshot(0.0, 0.0, 0.0, {101: 0.0, 102: 0.0, 103: 0.0}, [_counters(0, 0, 0.0, 0.0, 0)])
    python = 0.2 + 2.8 + 1.0
    snap = Snapshot(10.0, cpu_s, machine_s, {101: 0.2, 102: 2.8, 103: 1.0},
                    [_counters(frames + 10, frames, put_wait, get_wait, frames)])
    assert cpu_s >= python
    return base, snap


def test_idle_cores_while_decoders_wait_on_inference_is_a_plan_that_does_not_fit() -> None:
    check, cam = _check(ms=3.0, replan=False)
    assert check.plan.infer["person_detect"]["NUM_STREAMS"] == 1  # 3 ms looked cheap: one stream
    # observed: 70 % of 2 cores, decoders waiting on a full queue 80 % of the time; inference
    # took 14 - 4 = 10 CPU-s for 500 frames: 20 ms per inference, not 3
    check.evaluate(*_window(cpu_s=14.0, machine_s=14.0, put_wait=8.0, get_wait=0.1))
    status = check.result["status"]
    assert status.startswith("plan does not fit: 70% of 2 cores busy while decoders waited"), status
    assert "--replan" in status
    assert check.observed["infer_ms"]["person_detect"] == pytest.approx(20.0, rel=0.01)
    assert check.observed["decode_ms"][0] == pytest.approx(3000 / 510, rel=0.01)
    assert check.result["replan"]["infer"]["person_detect"] == {"NUM_STREAMS": 2, "INFERENCE_NUM_THREADS": 2}
    assert cam.stages["person_detect"].updates == []  # not applied without --replan
    assert any("plan check: plan does not fit" in line for line in check.summary_lines())


def test_replan_applies_the_new_plan_once_to_every_camera() -> None:
    check, cam = _check(ms=3.0, replan=True)
    check.evaluate(*_window(cpu_s=14.0, machine_s=14.0, put_wait=8.0, get_wait=0.1))
    (update,) = cam.stages["person_detect"].updates
    assert update["config"] == {"INFERENCE_PRECISION_HINT": "f32", "NUM_STREAMS": 2, "INFERENCE_NUM_THREADS": 2}
    assert update["requests"] == 3
    assert check.replanned["stages"]["person_detect"]["NUM_STREAMS"] == 2
    assert check.plan.infer["person_detect"]["NUM_STREAMS"] == 2
    check.evaluate(*_window(cpu_s=14.0, machine_s=14.0, put_wait=8.0, get_wait=0.1))
    assert len(cam.stages["person_detect"].updates) == 1  # once


def _ocr_check(objects_origin: str, cache: Any = None) -> tuple[PlanCheck, SimpleNamespace]:
    """``ocr`` planned with a text detector of 130 ms and a recogniser of 11 ms per line, at the
    1 line a frame assumed before any run (``objects_origin="assumed"``) or seen by one."""
    infos = [InferInfo("text_detect", ms=130.0, per_frame=1.0, origin="measured"),
             InferInfo("recognize", ms=11.0, per_frame=1.0, origin="measured", objects=True,
                       objects_origin=objects_origin)]
    cam = _camera()
    cam.stages = {"text_detect": _Stage(), "recognize": _Stage()}
    plan = plan_threads(2, 1, infos, decode_ms=2.5, host_ms=2.5)
    plan.host_key = "host|observed|ocr"
    return PlanCheck(plan, [cam], pipeline="ocr", uris=["clip.mp4"], cache=cache), cam


def _ocr_window() -> tuple[Snapshot, Snapshot]:
    """10 s at 80 % of 2 cores, 60 frames of 13 text lines each, the decoder waiting 90 % of the time."""
    zero = {"decoded": 0, "processed": 0, "put_wait_s": 0.0, "get_wait_s": 0.0,
            "inferences": {"text_detect": 0, "recognize": 0}}
    seen = {"decoded": 64, "processed": 60, "put_wait_s": 9.0, "get_wait_s": 0.0,
            "inferences": {"text_detect": 60, "recognize": 780}}
    return (Snapshot(0.0, 0.0, 0.0, {101: 0.0, 102: 0.0, 103: 0.0}, [zero]),
            Snapshot(10.0, 16.0, 16.0, {101: 0.02, 102: 0.15, 103: 0.2}, [seen]))


def test_a_plan_made_on_an_assumed_count_of_objects_is_redone_once_without_being_asked(tmp_path: Path) -> None:
    """Before any run the recogniser is planned for 1 line a frame; 13 are seen.  The check
    applies the plan the observed costs give, once, as ``--replan`` would, and says why; what
    the run saw is kept for the next start."""
    from pipeline.costs import CostCache, check_key, objects_key

    cache = CostCache(tmp_path / "costs.json", machine="test")
    check, cam = _ocr_check("assumed", cache)
    assert check.plan.assumed == ["objects per frame of recognize"]
    assert check.plan.infer["recognize"]["NUM_STREAMS"] == 1
    check.evaluate(*_ocr_window())
    status = check.result["status"]
    assert status.startswith("plan does not fit: 80% of 2 cores busy") and status.endswith("; re-planned"), status
    assert "--replan" not in status
    (update,) = cam.stages["recognize"].updates
    assert update["config"]["NUM_STREAMS"] == 2
    assert cam.stages["text_detect"].updates == []  # its share was right
    assert check.replanned["assumed"] == ["objects per frame of recognize"]
    assert check.plan.assumed == []  # the new plan rests on what was seen
    assert any("the plan assumed objects per frame of recognize" in line for line in check.summary_lines())
    check.evaluate(*_ocr_window())
    assert len(cam.stages["recognize"].updates) == 1  # once
    check.store()
    assert cache.get(objects_key("ocr", "recognize")) == 13.0
    assert cache.get("host|observed|ocr") == pytest.approx(1000 * 0.2 / 60, abs=1e-3)  # the worker's CPU
    assert cache.get(check_key("ocr"))["replanned"]["assumed"] == ["objects per frame of recognize"]  # for doctor


def test_a_plan_made_on_observed_objects_is_redone_only_when_asked() -> None:
    check, cam = _ocr_check("observed")
    assert check.plan.assumed == []
    check.evaluate(*_ocr_window())
    assert check.result["status"].endswith("run with --replan to apply it")
    assert cam.stages["recognize"].updates == [] and check.replanned is None


def test_a_re_plan_that_only_changes_decoder_threads_says_they_change_on_the_next_start() -> None:
    check, cam = _check(ms=20.0, replan=True)
    candidate = replace(check.plan, decoder_threads=check.plan.decoder_threads + 1)
    check._apply(candidate)
    assert cam.stages["person_detect"].updates == []
    assert check.summary_lines()[-1].endswith("no stage changes mid-run (decoder threads change on the next start)")


def test_busy_cores_or_a_busy_machine_or_a_balanced_plan_are_not_a_misfit() -> None:
    check, _ = _check(ms=3.0, replan=True)
    check.evaluate(*_window(cpu_s=18.6, machine_s=18.6, put_wait=8.0, get_wait=0.1))
    assert check.result["status"].startswith("ok: 93% of 2 cores busy")
    check.evaluate(*_window(cpu_s=9.0, machine_s=19.0, put_wait=8.0, get_wait=0.1))  # others took 1 core
    assert check.result["status"].startswith("machine busy: this run used 45% of 2 cores and other processes 1.0")
    check, _ = _check(ms=20.0, replan=True)  # measured right: the observed costs give the same plan
    check.evaluate(*_window(cpu_s=14.0, machine_s=14.0, put_wait=8.0, get_wait=0.1))
    assert "the observed costs give the same plan" in check.result["status"]
    assert check.replanned is None


def test_decoders_behind_with_idle_cores_is_reported_too() -> None:
    check, _ = _check(ms=20.0, replan=False)
    # the decoder used 9.4 s of CPU for 500 frames (18.4 ms each, e.g. a 4K stream); workers waited
    base = Snapshot(0.0, 0.0, 0.0, {101: 0.0, 102: 0.0, 103: 0.0}, [_counters(0, 0, 0.0, 0.0, 0)])
    snap = Snapshot(10.0, 11.0, 11.0, {101: 0.2, 102: 9.2, 103: 0.5}, [_counters(500, 500, 0.0, 7.0, 500)])
    check.evaluate(base, snap)
    assert "workers waited for decoded frames 70% of the time" in check.result["status"]


def test_ffmpeg_decoding_threads_count_as_decoding_not_inference() -> None:
    """A decoder with frame threads: the decoder thread itself used 0.3 s, FFmpeg's two
    decoding threads 2.7 s; both count as decoding, and inference keeps only the rest."""
    check, _ = _check(ms=20.0, replan=False)
    base = Snapshot(0.0, 0.0, 0.0, {101: 0.0, 102: 0.0, 103: 0.0, 201: 0.0, 202: 0.0},
                    [_counters(0, 0, 0.0, 0.0, 0)], frozenset({201, 202}))
    snap = Snapshot(10.0, 14.0, 14.0, {101: 0.2, 102: 0.1, 103: 1.0, 201: 1.4, 202: 1.3},
                    [_counters(510, 500, 8.0, 0.1, 500)], frozenset({201, 202, 203}))  # 203: started since
    check.evaluate(base, snap)
    assert check.observed["decode_ms"][0] == pytest.approx(3000 / 510, rel=0.01)
    # 14 s of CPU less 4 s of these threads, over 500 inferences
    assert check.observed["infer_ms"]["person_detect"] == pytest.approx(20.0, rel=0.01)


def test_a_file_decode_cost_seen_lower_is_lowered_and_never_raised(tmp_path: Path) -> None:
    """A decode cost measured while the machine was busy would stay too high for good: a run that
    sees a frame cost less (3 s of decoding for 510 frames: 5.88 ms) lowers it, judged or not.  One
    that sees it cost about as much or more leaves it (running beside other work only adds CPU
    time), and so do cameras that shared FFmpeg's frame threads out (no camera's own cost)."""
    from pipeline.costs import CostCache, decode_key

    cache = CostCache(tmp_path / "costs.json", machine="test")
    key = decode_key("clip.mp4", False)
    for cached, kept, judge in ((8.0, 3000 / 510, False), (8.0, 3000 / 510, True), (6.0, 6.0, True),
                                (5.0, 5.0, True)):
        cache.put(key, {"ms": cached, "width": 1920, "height": 1080})
        check, _ = _check(ms=20.0, replan=False)
        check.cache = cache
        check.evaluate(*_window(cpu_s=14.0, machine_s=14.0, put_wait=8.0, get_wait=0.1), judge=judge)
        check.store()
        assert cache.get(key) == {"ms": pytest.approx(kept, abs=1e-3), "width": 1920, "height": 1080}, cached
    # two cameras of the clip whose decoders had frame threads: their CPU is shared out by frames
    cache.put(key, {"ms": 8.0, "width": 1920, "height": 1080})
    plan = plan_threads(2, 2, [InferInfo("person_detect", ms=20.0, per_frame=1.0)], decode_ms=3.6, host_ms=0.6)
    check = PlanCheck(plan, [_camera(), _camera()], pipeline="persons", uris=["clip.mp4", "clip.mp4"], cache=cache)
    zero = _counters(0, 0, 0.0, 0.0, 0)
    base = Snapshot(0.0, 0.0, 0.0, {101: 0.0, 102: 0.0, 103: 0.0, 201: 0.0}, [zero, zero], frozenset({201}))
    snap = Snapshot(10.0, 16.0, 16.0, {101: 0.2, 102: 0.3, 103: 1.0, 201: 2.5},
                    [_counters(510, 500, 8.0, 0.1, 500)] * 2, frozenset({201}))
    check.evaluate(base, snap, judge=False)
    assert check.observed["decode_ms"][0] < 8.0 * 0.95
    check.store()
    assert cache.get(key)["ms"] == 8.0


def test_a_thread_that_ended_keeps_its_cpu_time_in_later_snapshots(monkeypatch: pytest.MonkeyPatch) -> None:
    """A file's reader ends before its last frames are decoded: the decode cost stays known
    to the end of the run, and the reader's CPU time is not taken for inference."""
    check, cam = _check(ms=20.0, replan=False)
    cpu = {101: 0.2, 102: 2.0, 103: 1.0, 201: 0.5}  # 201: an FFmpeg frame thread
    monkeypatch.setattr(run_counters, "thread_cpu_s", lambda tid: cpu.get(tid))
    monkeypatch.setattr(run_counters, "ffmpeg_decoder_threads", lambda: {t: c for t, c in cpu.items() if t == 201})
    first = check.snapshot()
    assert first.threads == cpu and first.codec == {201}
    del cpu[101], cpu[201]  # the reader and the frame thread end
    cpu[102] = 4.0
    assert set(check.snapshot().threads) == {102, 103}  # without the last snapshot: lost
    later = check.snapshot(first)
    assert later.threads == {101: 0.2, 102: 4.0, 103: 1.0, 201: 0.5} and later.codec == {201}

    base = Snapshot(0.0, 0.0, 0.0, {101: 0.0, 102: 0.0, 103: 0.0, 201: 0.0}, [_counters(0, 0, 0.0, 0.0, 0)],
                    frozenset({201}))
    check.evaluate(base, replace(later, wall=10.0, cpu=15.7, machine=15.7, cams=[_counters(500, 500, 8.0, 0.1, 500)]))
    assert check.observed["decode_ms"][0] == pytest.approx(1000 * (0.2 + 4.0 + 0.5) / 500)
    assert check.observed["infer_ms"]["person_detect"] == pytest.approx(20.0, rel=0.01)  # 15.7 - 5.7 s over 500


def test_threads_that_ended_before_any_snapshot_count_as_they_left(monkeypatch: pytest.MonkeyPatch) -> None:
    """A short run's camera threads, and FFmpeg's frame threads (gone once the decoder closes),
    have ended before the end-of-run snapshot: they count with the CPU time they had when
    their camera's threads ended, as what they were (decoding), not as inference."""
    check, cam = _check(ms=20.0, replan=False)
    monkeypatch.setattr(run_counters, "thread_cpu_s", lambda tid: {103: 1.0, 101: 9.9}.get(tid))  # 101: id reused
    monkeypatch.setattr(run_counters, "ffmpeg_decoder_threads", lambda: {})
    cam.exit_cpu = {101: 0.2, 102: 0.4}
    cam.exit_codec_cpu = {201: 1.5, 202: 1.4}
    snap = check.snapshot()
    assert snap.threads == {101: 0.2, 102: 0.4, 103: 1.0, 201: 1.5, 202: 1.4} and snap.codec == {201, 202}
    base = Snapshot(0.0, 0.0, 0.0, {}, [_counters(0, 0, 0.0, 0.0, 0)])
    check.evaluate(base, replace(snap, wall=1.0, cpu=8.5, machine=8.5, cams=[_counters(150, 150, 0.0, 0.0, 150)]),
                   judge=False)
    assert check.observed["decode_ms"][0] == pytest.approx(1000 * (0.2 + 0.4 + 1.5 + 1.4) / 150, abs=1e-3)
    assert check.observed["infer_ms"]["person_detect"] == pytest.approx(1000 * (8.5 - 4.5) / 150, rel=0.01)
    assert check.result["status"].startswith("not judged") and not check.judged


def test_a_replan_mid_run_loses_no_frame_and_changes_no_result(videos_dir: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Every camera's detector is recompiled mid-run: frames in flight finish on the old
    compiled model, later ones on the new, all in order, with the same boxes."""
    from pipeline.config import load_config
    from pipeline.graph import build_graph
    from pipeline.runtime import RunOptions, run_pipeline

    monkeypatch.setattr(plan_check, "WARMUP_S", 0.2)
    monkeypatch.setattr(plan_check, "MIN_WINDOW_S", 0.2)
    monkeypatch.setattr(plan_check, "SAMPLE_EVERY_S", 0.2)
    monkeypatch.setattr(PlanCheck, "_verdict", lambda self, *a: "plan does not fit: forced for the test")

    def candidate(self, *args):
        plan = plan_threads(self.plan.cores, self.plan.sources, list(self.infos.values()))
        plan.infer = {"person_detect": {"NUM_STREAMS": 2, "INFERENCE_NUM_THREADS": 2}}
        plan.requests = {"person_detect": 4}
        return plan

    monkeypatch.setattr(PlanCheck, "_candidate", candidate)
    cfg = load_config(str(ROOT / "pipelines.yaml"), check_files=False)
    graph = build_graph(cfg.get("persons"), str(ROOT / "pipelines.yaml"))
    clip = str(videos_dir / "one-by-one-person-detection.mp4")
    runs = {}
    for name, replan in (("plain", False), ("replanned", True)):
        opts = RunOptions(output_dir=tmp_path / name, max_frames=240, cores=2, handle_signals=False, replan=replan,
                          capture_delay_ms=4.0)  # long enough for the check to act mid-run
        summary = run_pipeline(graph, [clip], opts)
        assert summary.error is None
        runs[name] = [json.loads(line) for line in next((tmp_path / name).glob("*.jsonl")).read_text().splitlines()]
        runs[name] = [r for r in runs[name] if "seq" in r]
        if replan:
            assert summary.plan_check["replanned"]["stages"]["person_detect"]["NUM_STREAMS"] == 2
            assert 0 < summary.plan_check["replanned"]["at_s"] < summary.wall_s
    plain, replanned = runs["plain"], runs["replanned"]
    assert [r["seq"] for r in replanned] == list(range(240)) == [r["seq"] for r in plain]
    assert sum(len(r["objects"]) for r in plain) > 50
    for a, b in zip(plain, replanned):
        assert len(a["objects"]) == len(b["objects"]), a["seq"]
        for oa, ob in zip(a["objects"], b["objects"]):
            assert max(abs(x - y) for x, y in zip(oa["box"], ob["box"])) < 0.5


def test_a_replan_mid_run_keeps_the_requests_the_user_set(videos_dir: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """``--requests N`` is the user's: a re-plan mid-run changes the compile properties of the
    cameras' models, not their requests."""
    from pipeline.config import load_config
    from pipeline.graph import build_graph
    from pipeline.runtime import RunOptions, run_pipeline

    monkeypatch.setattr(plan_check, "WARMUP_S", 0.2)
    monkeypatch.setattr(plan_check, "MIN_WINDOW_S", 0.2)
    monkeypatch.setattr(plan_check, "SAMPLE_EVERY_S", 0.2)
    monkeypatch.setattr(PlanCheck, "_verdict", lambda self, *a: "plan does not fit: forced for the test")

    def candidate(self, *args):  # the model one thread more
        plan = plan_threads(self.plan.cores, self.plan.sources, list(self.infos.values()))
        plan.infer = {n: {**c, "INFERENCE_NUM_THREADS": c["INFERENCE_NUM_THREADS"] + 1}
                      for n, c in self.plan.infer.items()}
        return plan

    monkeypatch.setattr(PlanCheck, "_candidate", candidate)
    cfg = load_config(str(ROOT / "pipelines.yaml"), check_files=False)
    graph = build_graph(cfg.get("persons"), str(ROOT / "pipelines.yaml"))
    sessions: list[Any] = []
    opts = RunOptions(output_dir=tmp_path, max_frames=240, cores=2, handle_signals=False, replan=True,
                      capture_delay_ms=4.0, on_session=sessions.append, requests=1)
    summary = run_pipeline(graph, [str(videos_dir / "one-by-one-person-detection.mp4")], opts)
    assert summary.error is None, summary.error
    (cam,) = sessions[0].cameras()
    stage = cam.stages["person_detect"]
    assert stage.params.requests == 1
    # the new compile properties were applied, and nothing else
    assert summary.plan_check["replanned"]["stages"] == {
        "person_detect": {k: stage.params.config[k] for k in ("NUM_STREAMS", "INFERENCE_NUM_THREADS")}}


def test_a_run_too_short_to_judge_still_observes_its_costs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run under the warm-up is not judged, but its costs are observed over all of it (the
    camera threads have ended by then: their CPU time is what they had when they ended), and
    kept for the next start only where nothing observed is kept yet."""
    from pipeline.config import parse_config
    from pipeline.costs import CostCache
    from pipeline.graph import build_graph
    from pipeline.runtime import RunOptions, run_pipeline

    monkeypatch.setenv("VAPIPE_COST_CACHE", str(tmp_path / "costs.json"))
    text = ("pipelines:\n  p:\n    stages:\n      - {name: decode, type: decode}\n"
            "      - {name: metadata, type: metadata}\n")
    graph = build_graph(parse_config(text, "p.yaml").get("p"), "p.yaml")
    source = "testsrc://ticker?width=640&height=360&frames=90"

    def run() -> Any:
        summary = run_pipeline(graph, [source], RunOptions(output_dir=tmp_path / "out", cores=2,
                                                           handle_signals=False))
        assert summary.error is None and summary.sources[0].processed == 90
        return summary

    first = run()
    assert first.wall_s < plan_check.WARMUP_S + plan_check.MIN_WINDOW_S
    assert first.plan_check["status"].startswith("not judged")
    observed = first.plan_check["observed"]
    assert observed["decode_ms"][0] is not None and observed["decode_ms"][0] > 0  # the decoder had ended
    assert observed["host_ms"] > 0
    assert "observed:" in first.plan_check_text
    key = first.plan["host_key"]
    assert CostCache().get(key) == pytest.approx(observed["host_ms"], abs=1e-3)  # the first observation is kept
    CostCache().put(key, 123.0)  # as a judged run would have kept it
    second = run()
    assert second.plan["host_origin"] == "observed" and second.plan["host_ms"] == 123.0
    assert CostCache().get(key) == 123.0  # a short run does not replace it
