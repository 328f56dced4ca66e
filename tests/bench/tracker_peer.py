"""vapipe's tracker against Roboflow's ByteTrack on the TUD sequences (noisy detections made from
the ground truth py-motmetrics ships; see tests/stages/tracking/mot.py), scored with motmetrics.

First the check that this scoring reproduces motmetrics' published numbers for its own
test.txt; then per sequence and miss rate, over seeds: mean MOTA and IDF1, total id switches.

    python -m tests.bench.tracker_peer [--seeds 8]
"""

from __future__ import annotations

import argparse

from tests.stages.tracking import mot
from tests.stages.tracking.test_peer import compare


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=8)
    args = ap.parse_args(argv)
    seeds = range(args.seeds)
    print("motmetrics' published numbers (MOTA, IDF1, id switches) and this scoring of its test.txt:")
    for seq in mot.SEQUENCES:
        got = mot.score(mot.load(seq), mot.load(seq, "test"))
        pub = mot.PUBLISHED[seq]
        print(f"  {seq:<15} published {pub['mota']:.3f} {pub['idf1']:.3f} {pub['num_switches']}   "
              f"computed {got['mota']:.3f} {got['idf1']:.3f} {got['num_switches']:.0f}")
    print(f"\n{'sequence':<15} {'miss':>9} {'tracker':<24} {'MOTA':>6} {'IDF1':>6} {'id sw':>6}   ({len(seeds)} seeds)")
    for seq in mot.SEQUENCES:
        for miss in (None, 0.10, 0.15, 0.20):
            for name, r in compare(seq, miss, seeds).items():
                label = "10-20 %" if miss is None else f"{100 * miss:.0f} %"
                print(f"{seq:<15} {label:>9} {name:<24} {r['mota']:>6.3f} {r['idf1']:>6.3f} "
                      f"{r['num_switches']:>6.0f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
