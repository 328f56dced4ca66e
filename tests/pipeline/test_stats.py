"""LatencyStats: ring of recent samples, whole-run histogram."""

from __future__ import annotations

import numpy as np

from pipeline.stats import LATENCY_BUCKETS_MS, LatencyStats


def test_samples_come_back_oldest_first_before_and_after_the_ring_wraps() -> None:
    lat = LatencyStats(keep=4)
    for ms in (1.0, 2.0, 3.0):
        lat.add(ms)
    assert lat.samples().tolist() == [1.0, 2.0, 3.0]
    for ms in (4.0, 5.0, 6.0):
        lat.add(ms)
    assert lat.samples().tolist() == [3.0, 4.0, 5.0, 6.0]
    assert lat.count == 6


def test_summary_reads_the_kept_samples_and_the_histogram_counts_all() -> None:
    lat = LatencyStats(keep=100)
    for ms in range(1, 101):
        lat.add(float(ms))
    s = lat.summary()
    assert s["count"] == 100
    assert s["p50_ms"] == np.percentile(np.arange(1, 101), 50)
    assert 99.0 <= s["p99_ms"] <= 100.0
    assert sum(lat.buckets) == 100
    # 1 ms is the only sample at or below the first bound; 2 and 2.5 fall in the second
    assert lat.buckets[0] == 1 and lat.buckets[1] == 1
    assert lat.buckets[-1] == 0 and LATENCY_BUCKETS_MS[-1] == 2000.0


def test_summary_can_leave_out_the_oldest_samples() -> None:
    lat = LatencyStats(keep=8)
    for ms in (500.0, 400.0) + (10.0,) * 8:  # two slow start-up samples, then the ring wraps
        lat.add(ms)
    assert lat.summary()["p99_ms"] == 10.0  # the start-up samples already left the ring
    lat = LatencyStats(keep=100)
    for ms in (500.0, 400.0) + (10.0,) * 8:
        lat.add(ms)
    assert lat.summary()["p99_ms"] > 400.0 and lat.summary(skip=2)["p99_ms"] == 10.0
    assert lat.summary(skip=2)["count"] == 10 and lat.summary(skip=20)["p50_ms"] == 0.0


def test_a_source_counts_the_frames_its_queues_dropped_after_a_given_time() -> None:
    """A full drop_oldest queue drops its oldest item and keeps the time of the drop: the drops
    after the start-up can be told from those during it."""
    import threading
    import time

    from pipeline.queues import BoundedQueue
    from pipeline.stats import SourceStats

    queue = BoundedQueue(1, "drop_oldest", threading.Event())
    queue.put("a")
    queue.put("b")                 # drops "a"
    time.sleep(0.02)
    later = time.monotonic()
    queue.put("c")                 # drops "b"
    assert queue.dropped == 2 and len(queue.drop_times) == 2
    stats = SourceStats("cam", dropped=queue.dropped, drop_times=sorted(queue.drop_times))
    assert stats.dropped_after(later) == 1
    assert stats.dropped_after(0.0) == 2


def test_a_frozen_record_keeps_its_summary_and_histogram_without_the_samples() -> None:
    lat = LatencyStats()
    for ms in (3.0, 7.0, 40.0, 400.0):
        lat.add(ms)
    summary, buckets = lat.summary(), list(lat.buckets)
    lat.freeze()
    assert lat._ring.nbytes == 0  # the 20,000-sample ring is gone
    assert lat.summary() == summary and lat.buckets == buckets and lat.count == 4 and len(lat.samples()) == 0
    lat.add(1.0)  # late samples change nothing
    assert lat.summary() == summary and lat.count == 4
