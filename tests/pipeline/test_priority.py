"""Producers yield the CPU while ahead of their consumer (pipeline/priority.py)."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from pipeline.config import parse_config
from pipeline.graph import build_graph
from pipeline.priority import NiceGroup, YieldWhileAhead, thread_nice
from pipeline.queues import BoundedQueue
from pipeline.runtime import RunOptions, run_pipeline

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice values are Linux's")

CAN_RAISE = os.geteuid() == 0  # raising a priority back needs CAP_SYS_NICE (or RLIMIT_NICE)


def _produce(queue: BoundedQueue, rule: YieldWhileAhead, puts: int, consumer_ms: float,
             seen: list[int], producer_ms: float = 0.0) -> None:
    """Put ``puts`` items on ``queue``, one every ``producer_ms``, while a consumer takes
    one every ``consumer_ms``; record the producer thread's nice value after every put."""
    done = threading.Event()

    def consume() -> None:
        while not done.is_set() or len(queue):
            if len(queue):
                queue.get()
            time.sleep(consumer_ms / 1000)

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    for i in range(puts):
        time.sleep(producer_ms / 1000)
        queue.put(i)
        rule.after_put()
        seen.append(thread_nice())
    done.set()
    consumer.join()


def _in_thread(fn, *args) -> None:
    t = threading.Thread(target=fn, args=args)
    t.start()
    t.join()


def test_a_producer_ahead_of_its_consumer_is_lowered_and_one_behind_is_not() -> None:
    base = thread_nice()
    queue = BoundedQueue(2, "block", threading.Event())
    ahead: list[int] = []
    rule = YieldWhileAhead(queue, nice=7, window=8)
    _in_thread(_produce, queue, rule, 40, 2.0, ahead)  # the consumer is slow: the queue stays full
    assert rule.lowered and rule.changes == 1
    assert ahead[:7] == [base] * 7 and ahead[-1] == max(base, 7)

    queue = BoundedQueue(2, "block", threading.Event())
    behind: list[int] = []
    rule = YieldWhileAhead(queue, nice=7, window=8)
    _in_thread(_produce, queue, rule, 40, 0.0, behind, 2.0)  # the consumer waits for every item
    assert not rule.lowered and rule.changes == 0
    assert set(behind) == {base}
    assert thread_nice() == base  # only the producer thread was ever touched


@pytest.mark.skipif(not CAN_RAISE, reason="raising a thread's priority back needs CAP_SYS_NICE")
def test_the_priority_comes_back_when_the_producer_falls_behind() -> None:
    base = thread_nice()
    queue = BoundedQueue(2, "block", threading.Event())
    rule = YieldWhileAhead(queue, nice=7, window=8)
    seen: list[int] = []

    def both() -> None:
        _produce(queue, rule, 24, 2.0, seen)   # ahead: lowered
        _produce(queue, rule, 24, 0.0, seen, 2.0)   # now behind: raised again
    _in_thread(both)
    assert max(seen) == max(base, 7) and seen[-1] == base
    assert rule.changes == 2 and not rule.lowered


def test_nice_zero_never_touches_the_thread() -> None:
    queue = BoundedQueue(1, "block", threading.Event())
    rule = YieldWhileAhead(queue, nice=0, window=1)
    seen: list[int] = []
    _in_thread(_produce, queue, rule, 10, 2.0, seen)
    assert rule.changes == 0 and set(seen) == {thread_nice()}


def test_bad_thresholds_are_refused() -> None:
    with pytest.raises(ValueError, match="behind < ahead"):
        YieldWhileAhead(BoundedQueue(1, "block", threading.Event()), window=4, ahead=0.1, behind=0.5)



class _Counted:
    """Stands for a queue: the rule reads only how many puts found it full."""

    full_puts = 0


class _Member:
    """A thread that joins ``group`` with its first put, then reports its nice value when asked;
    the test makes the member's later puts itself (the group acts on the thread it registered)."""

    def __init__(self, group: NiceGroup) -> None:
        self.queue = _Counted()
        self.rule = group.join(self.queue)
        self._ask = threading.Event()
        self._told = threading.Event()
        self._stop = False
        self.nice = -100
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        assert self._told.wait(5)

    def _run(self) -> None:
        self.rule.after_put()           # joins, from its own thread (not full)
        while True:
            self.nice = thread_nice()
            self._told.set()
            self._ask.wait(5)
            self._ask.clear()
            if self._stop:
                return

    def put(self, full: bool) -> None:
        self.queue.full_puts += int(full)
        self.rule.after_put()

    def report(self) -> int:
        self._told.clear()
        self._ask.set()
        assert self._told.wait(5)
        return self.nice

    def stop(self) -> None:
        self._stop = True
        self._ask.set()
        self._thread.join(5)


def test_the_decoders_of_a_group_are_lowered_together_on_their_pooled_share() -> None:
    base = thread_nice()
    group = NiceGroup(nice=7, window=4)
    a, b = _Member(group), _Member(group)   # one put each
    try:
        for _ in range(3):
            a.put(True)
            b.put(True)
        assert not group.lowered        # the first window (the start-up's) is not judged
        for _ in range(4):
            a.put(True)                 # a's queue is always full
        b.put(True)
        b.put(False)
        b.put(False)
        assert not group.lowered        # 7 of the 8 puts the group decides on
        b.put(False)                    # 5 of 8 found their queue full: b alone (1 of 4) would stay up
        assert group.lowered
        assert (a.report(), b.report()) == (max(base, 7), max(base, 7))
        assert a.rule.changes == b.rule.changes == 1
        c = _Member(group)              # a decoder that joins a lowered group starts lowered
        assert c.report() == max(base, 7)
        c.stop()
        c.rule.leave()
        if not CAN_RAISE:
            return

        def window(full: bool) -> None:
            for _ in range(4):
                a.put(full)
                b.put(full)

        window(False)                   # 0 of 8 full (c has left): both go back up together
        assert not group.lowered
        assert (a.report(), b.report()) == (base, base)
        assert a.rule.changes == b.rule.changes == 2
        window(True)                    # the lowering was undone at once: two full windows now
        assert not group.lowered
        window(True)
        assert group.lowered and a.report() == max(base, 7)
    finally:
        a.stop()
        b.stop()


def test_the_decoders_of_a_run_share_one_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    joined: list[NiceGroup] = []
    real = NiceGroup.join

    def join(self: NiceGroup, queue: BoundedQueue) -> YieldWhileAhead:
        joined.append(self)
        return real(self, queue)

    monkeypatch.setattr(NiceGroup, "join", join)
    graph = build_graph(parse_config(PIPELINE.format(decode=0, infer=6), "t.yaml").get("p"))
    summary = run_pipeline(graph, ["cam0", "cam1", "cam2"], RunOptions(output_dir=tmp_path, handle_signals=False))
    assert summary.error is None and all(s.processed == 80 for s in summary.sources)
    assert len(joined) == 3 and joined[0] is joined[1] is joined[2] and joined[0].nice == 10
    assert joined[0].lowered and all(s.decoder_priority_changes == 1 for s in summary.sources)

PIPELINE = """
pipelines:
  p:
    stages:
      - {{name: src, type: "pipeline.testing:ListSource", params: {{count: 80, decode_ms: {decode}}}}}
      - {{name: infer, type: "pipeline.testing:SleepInfer", params: {{ms: {infer}, requests: 2}}}}
      - {{name: sink, type: "pipeline.testing:CollectSink"}}
"""


@pytest.mark.parametrize(("decode_ms", "infer_ms", "cores", "lowered"), [
    (0, 6, None, True),     # inference is the bottleneck: the decoder yields
    (6, 0, None, False),    # the decoder is the bottleneck: it keeps its priority
    (0, 6, 0, False),       # --cores 0: no plan, no priorities
])
def test_the_runtime_lowers_decoders_only_while_inference_is_the_bottleneck(
        tmp_path: Path, decode_ms: int, infer_ms: int, cores: int | None, lowered: bool) -> None:
    graph = build_graph(parse_config(PIPELINE.format(decode=decode_ms, infer=infer_ms), "t.yaml").get("p"))
    summary = run_pipeline(graph, ["cam"], RunOptions(output_dir=tmp_path, handle_signals=False, cores=cores))
    assert summary.error is None and summary.sources[0].processed == 80
    assert (summary.sources[0].decoder_priority_changes >= 1) is lowered
    assert ("nice 10 while ahead" in (summary.threads or "")) is (cores is None)
    assert summary.sources[0].as_dict()["decoder_priority_changes"] == summary.sources[0].decoder_priority_changes


def test_without_the_right_to_raise_it_the_thread_stays_lowered(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = os.setpriority

    def unprivileged(which: int, who: int, value: int) -> None:
        if value < os.getpriority(which, who):
            calls.append(value)
            raise PermissionError(13, "Permission denied")
        real(which, who, value)

    monkeypatch.setattr(os, "setpriority", unprivileged)
    queue = BoundedQueue(2, "block", threading.Event())
    rule = YieldWhileAhead(queue, nice=7, window=8)
    seen: list[int] = []

    def both() -> None:
        _produce(queue, rule, 24, 2.0, seen)
        _produce(queue, rule, 40, 0.0, seen, 2.0)
    _in_thread(both)
    assert rule.lowered and rule.stuck and len(calls) == 1  # tried once, then left alone
    assert seen[-1] == max(thread_nice(), 7)


class _Helper:
    """A thread that only waits (as an FFmpeg frame thread between frames); its native id."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        ready = threading.Event()
        self.tid = 0

        def run() -> None:
            self.tid = threading.get_native_id()
            ready.set()
            self.stop.wait(30)

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        ready.wait(5)

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


@pytest.mark.skipif(not CAN_RAISE, reason="raising a thread's priority back needs CAP_SYS_NICE")
def test_helper_threads_go_down_and_up_with_their_producer() -> None:
    """A decoder's FFmpeg frame threads do its decoding: lowering the decoder thread alone would
    leave them competing with inference.  Helpers added while the group is lowered start lowered."""
    early, late = _Helper(), _Helper()
    try:
        base = thread_nice(early.tid)
        queue = BoundedQueue(2, "block", threading.Event())
        rule = YieldWhileAhead(queue, nice=7, window=8)
        rule.add_helpers([early.tid])
        seen: list[tuple[int, int, int]] = []

        def both() -> None:
            _produce(queue, rule, 24, 2.0, [])   # ahead: lowered
            rule.add_helpers([late.tid, threading.get_native_id()])  # the producer itself is no helper
            seen.append((thread_nice(), thread_nice(early.tid), thread_nice(late.tid)))
            _produce(queue, rule, 24, 0.0, [], 2.0)   # now behind: raised again
            seen.append((thread_nice(), thread_nice(early.tid), thread_nice(late.tid)))
        _in_thread(both)
        lowered = max(base, 7)
        assert seen == [(lowered, lowered, lowered), (base, base, base)]
        assert rule.changes == 2 and set(rule.helpers) == {early.tid, late.tid}
    finally:
        early.close()
        late.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a process's threads are read from /proc (Linux)")
def test_helpers_that_ended_are_forgotten_when_new_ones_come() -> None:
    """A decoder opened again (a reconnect, a file's loop) starts new frame threads, and the old
    ones end: the rule keeps only threads that still run (an ended thread's id may come back)."""
    old, new = _Helper(), _Helper()
    try:
        rule = YieldWhileAhead(BoundedQueue(2, "block", threading.Event()), nice=7)
        rule.add_helpers([old.tid])
        old.close()
        deadline = time.monotonic() + 5  # join() returns a moment before the OS thread is gone
        while os.path.exists(f"/proc/self/task/{old.tid}") and time.monotonic() < deadline:
            time.sleep(0.001)
        rule.add_helpers([new.tid])
        assert set(rule.helpers) == {new.tid}
    finally:
        new.close()


def test_a_decoder_hands_its_ffmpeg_frame_threads_to_its_priority_rule(
        tmp_path: Path, make_clip, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``threads: 2`` FFmpeg decodes on two frame threads of its own (``av:h264:df<n>``);
    the camera's decoder adds them to its rule once its first frames are out."""
    from pipeline.thread_cpu import ffmpeg_decoder_threads

    added: list[list[int]] = []
    names: list[set[int]] = []
    real = YieldWhileAhead.add_helpers

    def add_helpers(self: YieldWhileAhead, tids) -> None:
        tids = list(tids)
        added.append(tids)
        names.append(set(ffmpeg_decoder_threads()))  # the frame threads alive at that moment
        real(self, tids)

    monkeypatch.setattr(YieldWhileAhead, "add_helpers", add_helpers)
    graph = build_graph(parse_config(DECODED, "t.yaml").get("p"))
    summary = run_pipeline(graph, [str(make_clip())], RunOptions(output_dir=tmp_path, handle_signals=False))
    assert summary.error is None and summary.sources[0].processed == 120
    assert len(added) == 1 and len(added[0]) == 2, added  # once, the decoder's two frame threads
    assert set(added[0]) <= names[0]


def test_each_new_decoder_of_a_looping_file_hands_over_its_frame_threads(
        tmp_path: Path, make_clip, monkeypatch: pytest.MonkeyPatch) -> None:
    """A looping file is opened again at its end, with a new decoder and new frame threads,
    which must go down and up with the decoder thread as the first ones did."""
    from pipeline.thread_cpu import ffmpeg_decoder_threads

    added: list[list[int]] = []
    real = YieldWhileAhead.add_helpers

    def add_helpers(self: YieldWhileAhead, tids) -> None:
        tids = list(tids)
        assert set(tids) <= set(ffmpeg_decoder_threads())
        added.append(tids)
        real(self, tids)

    monkeypatch.setattr(YieldWhileAhead, "add_helpers", add_helpers)
    graph = build_graph(parse_config(DECODED.replace("threads: 2", "threads: 2, loop: true"), "t.yaml").get("p"))
    opts = RunOptions(output_dir=tmp_path, handle_signals=False, max_frames=300)  # 120-frame clip: 3 decoders
    summary = run_pipeline(graph, [str(make_clip())], opts)
    assert summary.error is None and summary.sources[0].processed == 300
    assert [len(t) for t in added] == [2, 2, 2], added
    assert len({t for tids in added for t in tids}) == 6  # each decoder's own threads


DECODED = """
pipelines:
  p:
    stages:
      - {name: src, type: decode, params: {threads: 2}}
      - {name: sink, type: "pipeline.testing:CollectSink"}
"""
