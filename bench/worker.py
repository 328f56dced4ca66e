"""Entry point of a benchmark worker process: run one mode, print its result.

    python -m bench.worker --mode MODE --plan JSON

The result is a JSON object on the last line of stdout; the frames camera 0 recorded
are in ``OUT/records/MODE.json``.  The process exits without interpreter teardown
(see :data:`bench.hand_tuned.KEEP_ALIVE`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable

from .plan import BASE_MODES, VAPIPE_MODES, BenchError, BenchPlan, sweep_requests

__all__ = ["run_worker", "worker_main"]


def run_worker(mode: str, plan: BenchPlan) -> dict[str, Any]:
    """Run one mode in this process and return its measurements."""
    from . import hand_tuned, limits, naive, vapipe_modes

    runners: dict[str, Callable[[BenchPlan], dict[str, Any]]] = {
        "naive": naive.run_naive,
        "hand-tuned": hand_tuned.run_hand_tuned,
        "decode-alone": limits.run_decode_alone,
        "infer-alone": limits.run_infer_alone,
    }
    if mode in runners:
        return runners[mode](plan)
    if mode in VAPIPE_MODES or sweep_requests(mode):
        return vapipe_modes.run_vapipe(plan, mode)
    raise BenchError(f"unknown bench mode {mode!r}; valid: {', '.join(BASE_MODES)}, vapipe-rN")


def worker_main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.worker")
    ap.add_argument("--mode", required=True)
    ap.add_argument("--plan", required=True, help="BenchPlan as JSON")
    args = ap.parse_args(argv)
    plan = BenchPlan(**json.loads(args.plan))
    res = run_worker(args.mode, plan)
    res["mode"] = args.mode
    sys.stdout.flush()
    print(json.dumps(res))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # no teardown: compiled models that ran Python callbacks can hang in their destructor


if __name__ == "__main__":
    sys.exit(worker_main())
