"""Request priorities between cameras on a shared model: who starts first, the guaranteed
minimum rate, and no deadlock when a waiting camera holds slots itself."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from pipeline.arbiter import RequestArbiter, SourcePriority


def _start_waiters(arbiter: RequestArbiter, who: list[SourcePriority], order: list[str]) -> list[threading.Thread]:
    def run(p: SourcePriority) -> None:
        arbiter.acquire(p)
        order.append(p.name)

    threads = []
    for p in who:  # queue them in this order, each after the previous is waiting
        t = threading.Thread(target=run, args=(p,), daemon=True)
        t.start()
        threads.append(t)
        deadline = time.monotonic() + 2
        while p.waits == 0 and p.name not in order and time.monotonic() < deadline:
            time.sleep(0.001)
    return threads


def test_waiting_cameras_start_by_priority_then_in_arrival_order() -> None:
    arbiter = RequestArbiter(1)
    holder = SourcePriority("normal", name="holder")
    arbiter.acquire(holder)
    waiters = [SourcePriority("low", name="low"), SourcePriority("normal", name="n1"),
               SourcePriority("high", name="high"), SourcePriority("normal", name="n2")]
    order: list[str] = []
    threads = _start_waiters(arbiter, waiters, order)
    assert order == [] and arbiter.active == 1
    for expected in ("high", "n1", "n2", "low"):
        arbiter.release()
        deadline = time.monotonic() + 2
        while (not order or order[-1] != expected) and time.monotonic() < deadline:
            time.sleep(0.001)
        assert order[-1] == expected, order
    for t in threads:
        t.join(2)
    assert order == ["high", "n1", "n2", "low"]


def test_a_camera_below_its_min_fps_goes_first() -> None:
    arbiter = RequestArbiter(1)
    holder = SourcePriority("high", name="holder")
    arbiter.acquire(holder)
    starved = SourcePriority("low", min_fps=20.0, name="starved")
    starved.last_start = time.monotonic() - 1.0  # nothing started for a second: below 20 fps
    order: list[str] = []
    threads = _start_waiters(arbiter, [SourcePriority("normal", name="normal"), starved], order)
    arbiter.release()
    deadline = time.monotonic() + 2
    while not order and time.monotonic() < deadline:
        time.sleep(0.001)
    assert order[0] == "starved" and starved.promoted == 1
    arbiter.release()
    for t in threads:
        t.join(2)
    assert order == ["starved", "normal"]


def _wait_for(order: list[str], n: int) -> None:
    deadline = time.monotonic() + 2
    while len(order) < n and time.monotonic() < deadline:
        time.sleep(0.001)


def test_cameras_of_one_level_start_at_once_past_capacity() -> None:
    """Nobody to put first: every camera starts at once, the plugin's own queue keeps the
    streams busy (no idle stream between one inference ending and the next start)."""
    arbiter = RequestArbiter(1)
    cams = [SourcePriority("normal", name=f"n{k}") for k in range(3)]
    for cam in cams:
        arbiter.acquire(cam)
    assert arbiter.active == 3 and all(c.waits == 0 for c in cams)


def test_a_camera_of_another_level_is_put_first_until_it_leaves() -> None:
    """Two normal cameras run past capacity; a high one arrives: it waits for the first slot
    below capacity and starts before a normal camera that waits with it; while it is
    present the normal cameras are held to capacity, and once it leaves they are not."""
    arbiter = RequestArbiter(1)
    n1, n2, n3 = (SourcePriority("normal", name=f"n{k}") for k in (1, 2, 3))
    arbiter.acquire(n1)
    arbiter.acquire(n2)
    high = SourcePriority("high", name="high")
    order: list[str] = []
    threads = _start_waiters(arbiter, [high, n3], order)
    arbiter.release()
    time.sleep(0.05)
    assert order == [] and arbiter.active == 1   # one slot still held: at capacity
    arbiter.release()
    _wait_for(order, 1)
    time.sleep(0.05)
    assert order == ["high"] and arbiter.active == 1   # n3 waits for the high camera's slot
    arbiter.release()
    _wait_for(order, 2)
    assert order == ["high", "n3"]
    # the high camera is still present: n2 waits until it leaves
    threads += _start_waiters(arbiter, [n2], order)
    time.sleep(0.05)
    assert order == ["high", "n3"] and n2.waits == 1
    arbiter.leave(high)
    _wait_for(order, 3)
    assert order == ["high", "n3", "n2"] and arbiter.active == 2   # past capacity again
    for t in threads:
        t.join(2)


def test_a_camera_counts_as_present_for_a_while_after_its_last_start(monkeypatch: pytest.MonkeyPatch) -> None:
    import pipeline.arbiter as arbiter_module

    monkeypatch.setattr(arbiter_module, "PRESENCE_S", 0.2)
    arbiter = RequestArbiter(1)
    high = SourcePriority("high", name="high")
    arbiter.release(arbiter.acquire(high))
    normal = [SourcePriority("normal", name=f"n{k}") for k in range(2)]
    arbiter.acquire(normal[0])
    order: list[str] = []
    t0 = time.monotonic()
    threads = _start_waiters(arbiter, [normal[1]], order)
    _wait_for(order, 1)
    waited = time.monotonic() - t0
    assert order == ["n1"] and arbiter.active == 2, order
    assert 0.1 <= waited <= 1.0, waited   # held while the high camera was present
    for t in threads:
        t.join(2)


def test_a_finished_inference_gives_its_slot_to_a_waiter_before_its_owner_collects_it() -> None:
    """The owner of the only slot is busy elsewhere: once its inference is over, the waiting
    camera starts; the owner's own release later is a no-op (the slot is not freed twice)."""
    arbiter = RequestArbiter(1)
    owner = SourcePriority("normal", name="owner")
    ticket = arbiter.acquire(owner)
    over = threading.Event()
    arbiter.watch(ticket, over.is_set)
    order: list[str] = []
    threads = _start_waiters(arbiter, [SourcePriority("high", name="high")], order)
    time.sleep(0.05)
    assert order == [] and arbiter.active == 1  # still running: the waiter waits
    over.set()
    for t in threads:
        t.join(2)
    assert order == ["high"] and arbiter.active == 1  # the waiter holds the slot now
    arbiter.release(ticket)  # the owner collects its result late
    assert arbiter.active == 1
    second = SourcePriority("normal", name="second")
    threads = _start_waiters(arbiter, [second], order)
    assert order == ["high"]  # no slot was freed twice: the second camera still waits
    arbiter.release()
    for t in threads:
        t.join(2)
    assert order == ["high", "second"]


def test_a_waiter_asks_whether_an_inference_ended_without_holding_the_lock() -> None:
    """``over()`` calls into the runtime, which lets go of the GIL: asked under the arbiter's
    lock, every other camera would wait for the lock until the asking thread had the GIL back.
    While the waiter asks, another thread takes the lock at once."""
    arbiter = RequestArbiter(1)
    ticket = arbiter.acquire(SourcePriority("normal", name="owner"))
    blocked: list[bool] = []

    def over() -> bool:
        other = threading.Thread(target=arbiter.release, args=(-1,))   # takes the lock; no slot -1
        other.start()
        other.join(1.0)
        blocked.append(other.is_alive())
        return True

    arbiter.watch(ticket, over)
    order: list[str] = []
    for t in _start_waiters(arbiter, [SourcePriority("high", name="high")], order):
        t.join(2)
    assert order == ["high"] and blocked and not any(blocked)


def test_unknown_priority_is_rejected_naming_the_choices() -> None:
    with pytest.raises(ValueError, match="unknown priority 'urgent'; valid: high, normal, low"):
        SourcePriority("urgent")


def test_pools_of_several_cameras_share_a_model_without_deadlock_and_keep_results() -> None:
    """Eight cameras' pools on one compiled model with capacity 2: each camera keeps several
    requests in flight, so waiting cameras hold slots themselves; every result is right."""
    import openvino as ov
    import openvino.opset13 as ops

    from pipeline.engine import Engine, InputSpec

    x = ops.parameter([1, 3, 32, 32], np.float32, name="image")
    model = ov.Model([ops.reduce_sum(x, [1, 2, 3], keep_dims=False)], [x], "sum")
    path = _save(model)
    loaded = Engine().load(path, InputSpec(host_color="RGB", model_color="RGB"), "CPU", "THROUGHPUT",
                           {"NUM_STREAMS": 2, "INFERENCE_NUM_THREADS": 2})
    assert loaded.arbiter().capacity == loaded.optimal_requests
    levels = ["high"] + ["normal"] * 6 + ["low"]
    results: dict[int, list[tuple[float, float]]] = {}
    errors: list[BaseException] = []

    def camera(k: int) -> None:
        try:
            pool = loaded.create_pool(3, SourcePriority(levels[k], min_fps=1.0, name=str(k)))
            rng = np.random.default_rng(k)
            images = [rng.integers(0, 256, (32, 32, 3), dtype=np.uint8) for _ in range(40)]
            jobs = [(float(img.astype(np.float64).sum()), pool.start(img, lambda outs: float(outs[0][0])))
                    for img in images]
            results[k] = [(want, pool.finish(job)) for want, job in jobs]
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=camera, args=(k,), daemon=True) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and all(not t.is_alive() for t in threads)
    assert loaded.arbiter().active == 0
    for k in range(8):
        assert len(results[k]) == 40
        assert all(abs(want - got) <= 1e-3 * want for want, got in results[k]), k


def _save(model) -> str:
    import tempfile

    import openvino as ov

    path = tempfile.mkdtemp() + "/sum.xml"
    ov.save_model(model, path)
    return path


def _the_last_slot_waits_for(arbiter: RequestArbiter, normal: SourcePriority, high: SourcePriority) -> None:
    """With one of two slots held: ``normal`` asks for the last one and waits; ``high``, asking
    after it, starts first, on arrival (it never queues); ``normal`` starts when the other
    slot is released."""
    order: list[str] = []
    threads = _start_waiters(arbiter, [normal], order)
    time.sleep(0.02)
    assert order == [] and arbiter.active == 1
    threads += _start_waiters(arbiter, [high], order)
    _wait_for(order, 1)
    assert order == [high.name]
    assert high.waits == 0
    arbiter.release()   # the other slot
    _wait_for(order, 2)
    assert order == [high.name, normal.name]
    for t in threads:
        t.join(2)


def test_the_last_slot_is_kept_for_a_more_urgent_camera_that_is_due() -> None:
    """A high camera asks every 0.4 s and holds its slot 0.1 s; one normal camera holds the
    other slot all along.  Right after the high camera's inference a second normal camera
    takes the last slot at once; shortly before the high camera is due it waits, and the
    high camera, arriving after it, starts first."""
    arbiter = RequestArbiter(2)
    n1, n2 = SourcePriority("normal", name="n1"), SourcePriority("normal", name="n2")
    high = SourcePriority("high", name="high")
    arbiter.acquire(n1)
    for k in range(4):
        last = time.monotonic()
        ticket = arbiter.acquire(high)
        time.sleep(0.1)
        arbiter.release(ticket)
        if k < 3:
            time.sleep(0.3)
    early = arbiter.acquire(n2)   # due in 0.3 s, an inference takes 0.1 s: the slot is free to use
    assert n2.waits == 0
    arbiter.release(early)
    time.sleep(max(0.0, last + 0.4 - 0.05 - time.monotonic()))
    _the_last_slot_waits_for(arbiter, n2, high)   # 0.05 s before the high camera is due


def test_the_last_slot_is_kept_for_the_slow_inferences_too() -> None:
    """The high camera asks every 0.5 s and its inferences take 0.02 or 0.18 s in turn (mean
    0.1 s): 0.2 s before it is due an inference started now may well outlast the mean, so a
    normal camera asking for the last slot then waits; 0.45 s before, it starts at once."""
    arbiter = RequestArbiter(2)
    n1, n2 = SourcePriority("normal", name="n1"), SourcePriority("normal", name="n2")
    high = SourcePriority("high", name="high")
    arbiter.acquire(n1)   # holds the other slot all along
    for k in range(10):
        last = time.monotonic()
        ticket = arbiter.acquire(high)
        time.sleep(0.02 if k % 2 else 0.18)
        arbiter.release(ticket)
        time.sleep(max(0.0, last + 0.5 - time.monotonic()))
    # the high camera asked last at `last` and is next due at last + 0.5 (it is late now:
    # skip one period, its pace is kept)
    time.sleep(max(0.0, last + 0.5 + 0.05 - time.monotonic()))
    ticket = arbiter.acquire(high)
    last = time.monotonic()
    arbiter.release(ticket)
    time.sleep(max(0.0, last + 0.05 - time.monotonic()))   # 0.45 s before it is due
    early = arbiter.acquire(n2)
    assert n2.waits == 0
    arbiter.release(early)
    time.sleep(max(0.0, last + 0.3 - time.monotonic()))
    _the_last_slot_waits_for(arbiter, n2, high)   # 0.2 s before it is due


def test_the_last_slot_is_kept_for_an_urgent_camera_that_arrives_irregularly() -> None:
    """The high camera asks every 0.5 or 0.3 s in turn (mean 0.4 s, its gaps 0.1 s off the mean)
    and its inferences are short: 0.1 s before it is due it may already come (after a late
    frame the next one is early), so a normal camera asking for the last slot then waits (with
    gaps of exactly 0.4 s it would not: an inference started then ends long before)."""
    arbiter = RequestArbiter(2)
    n2 = SourcePriority("normal", name="n2")
    high = SourcePriority("high", name="high")
    arbiter.acquire(SourcePriority("normal", name="n1"))   # holds the other slot all along
    last = _paced(arbiter, high, [0.5, 0.3] * 5 + [0.5])
    time.sleep(max(0.0, last + 0.4 - 0.1 - time.monotonic()))
    _the_last_slot_waits_for(arbiter, n2, high)


def test_the_last_slot_is_kept_for_an_urgent_camera_late_by_up_to_a_gap() -> None:
    """The high camera asks every 0.2 s; 0.15 s after it was due (its frame held up upstream)
    a normal camera asking for the last slot still waits, and the high camera, coming then,
    starts first.  Late by more than a gap, it no longer counts as due: the normal camera
    starts at once."""
    for late, kept in ((0.15, True), (0.3, False)):
        arbiter = RequestArbiter(2)
        n2 = SourcePriority("normal", name="n2")
        high = SourcePriority("high", name="high")
        arbiter.acquire(SourcePriority("normal", name="n1"))   # holds the other slot all along
        last = _paced(arbiter, high, [0.2] * 9)
        time.sleep(max(0.0, last + 0.2 + late - time.monotonic()))
        if kept:
            _the_last_slot_waits_for(arbiter, n2, high)
        else:
            arbiter.acquire(n2)
            assert n2.waits == 0, late


def _paced(arbiter: RequestArbiter, high: SourcePriority, gaps: list[float]) -> float:
    """``high`` starts a 10 ms inference, then again after each of ``gaps`` (s); returns the
    monotonic time of its last start."""
    last = time.monotonic()
    for gap in [0.0, *gaps]:
        last += gap
        time.sleep(max(0.0, last - time.monotonic()))
        ticket = arbiter.acquire(high)
        time.sleep(0.01)
        arbiter.release(ticket)
    return last
