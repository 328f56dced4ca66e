"""Entry point of a peer mode, run by the peers' interpreter:

    python -m bench.peers.worker --peer NAME --plan JSON

Imports the standard library, numpy, PyAV, the peer and :mod:`bench.plan` /
:mod:`bench.measure` only (never vapipe's core), and measures as every other mode
does: per camera a PyAV decode thread hands frames to the peer's own processing
call in the camera's thread; the result is a JSON object on the last line of stdout
and camera 0's first frames go to ``OUT/records/NAME.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable

from bench.measure import Cameras, decoder_thread, file_sha256, write_records
from bench.plan import BenchPlan

__all__ = ["run_loop", "main"]


def run_loop(plan: BenchPlan, make_model: Callable[[], Any], process: Callable[[Any, Any, int], list[dict[str, Any]]],
             pixel_format: str) -> dict[str, Any]:
    """Run ``process(model, image, seq) -> recorded objects`` on every frame of every camera
    (one ``make_model()`` per camera; images are ``pixel_format`` arrays from PyAV)."""
    settings = plan.peer
    cams = Cameras(plan.cameras, plan.record_frames)

    def camera(cam: int) -> None:
        try:
            model = make_model()
        except BaseException as exc:  # noqa: BLE001
            cams.fail(exc)
            return
        frames, reader = decoder_thread(plan.source, settings.get("decode_threads", 0), plan.frames, plan.loop,
                                        cams.stop, lambda f: f.to_ndarray(format=pixel_format), cams.fail)
        seq = 0
        try:
            while (item := frames.get()) is not None:
                image, t0 = item
                objects = process(model, image, seq)
                cams.done(cam, seq, t0, lambda: objects)
                seq += 1
        except BaseException as exc:  # noqa: BLE001
            cams.fail(exc)
            while frames.get() is not None:  # let the decoder finish
                pass
        reader.join()

    cams.run(camera)
    write_records(plan.out, settings["name"], cams.recorder.records)
    return cams.clock.result()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.peers.worker")
    ap.add_argument("--peer", required=True, choices=["mediapipe", "rapidocr"])
    ap.add_argument("--plan", required=True, help="BenchPlan as JSON")
    args = ap.parse_args(argv)
    plan = BenchPlan(**json.loads(args.plan))
    if args.peer == "mediapipe":
        from bench.peers import mediapipe_faces as peer
    else:
        from bench.peers import rapidocr_text as peer
    res = peer.run(plan)
    res["mode"] = args.peer
    res["models_sha256"] = sorted(file_sha256(p) for p in peer.model_files(plan))
    res["version"] = peer.version()
    sys.stdout.flush()
    print(json.dumps(res))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # the peers' graph/session teardown adds nothing to measure


if __name__ == "__main__":
    sys.exit(main())
