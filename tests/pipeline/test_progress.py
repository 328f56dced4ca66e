import io
from types import SimpleNamespace

import pytest

from pipeline import progress
from pipeline.progress import ConsoleProgress


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _stats(processed: int, total: int | None) -> list[SimpleNamespace]:
    return [SimpleNamespace(source="cam1", processed=processed, total=total, fps=25.0),
            SimpleNamespace(source="cam2", processed=7, total=None, fps=12.5)]


def test_a_log_gets_a_line_every_five_seconds_and_nothing_before(monkeypatch: pytest.MonkeyPatch) -> None:
    clock, err = _Clock(), io.StringIO()
    monkeypatch.setattr(progress.time, "monotonic", clock)
    monkeypatch.setattr(progress.sys, "stderr", err)
    show = ConsoleProgress()
    show(_stats(10, 40))
    clock.now += 4.9
    show(_stats(20, 40))
    assert err.getvalue() == ""  # a run that fails at once stays one line
    clock.now += 0.2
    show(_stats(30, 40))
    assert err.getvalue() == "cam1: 30/40  75% 25.0 fps | cam2: 7 12.5 fps\n"
    show.finish()
    assert err.getvalue().count("\n") == 1


def test_a_terminal_gets_one_line_rewritten_and_ended_at_the_finish(monkeypatch: pytest.MonkeyPatch) -> None:
    clock, err = _Clock(), _Tty()
    monkeypatch.setattr(progress.time, "monotonic", clock)
    monkeypatch.setattr(progress.sys, "stderr", err)
    show = ConsoleProgress(every_s=0.5)
    for done in (10, 20):
        clock.now += 0.6
        show(_stats(done, 40))
    assert err.getvalue().count("\r\x1b[K") == 2 and "\n" not in err.getvalue()
    show.finish()
    assert err.getvalue().endswith("cam1: 20/40  50% 25.0 fps | cam2: 7 12.5 fps\n")
