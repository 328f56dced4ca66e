"""Print the text an `ocr` run recognised, and where its outputs are.

    python samples/read_text.py OUTPUT_DIR

Reads every ``*.jsonl`` written by the metadata sink in OUTPUT_DIR and lists
the lines of text read on the most frames (at most ``SHOWN``), each with the
number of frames it was read in (lines cut by the frame edge, as scrolling
text is while it enters, are left out), after the number of distinct lines.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path


#: lines listed per file, most frequent first
SHOWN = 30

def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: read_text.py OUTPUT_DIR", file=sys.stderr)
        return 2
    out = Path(argv[0])
    jsonls = sorted(out.glob("*.jsonl"))
    if not jsonls:
        print(f"read_text: no .jsonl files in {out}", file=sys.stderr)
        return 1
    for path in jsonls:
        texts: Counter[str] = Counter()
        frames = unreadable = 0
        source = path.stem
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:  # e.g. the last line of a run killed while it wrote
                unreadable += 1
                continue
            if "event" in record:
                continue
            frames += 1
            source = record.get("source", source)
            w, h = record["width"], record["height"]
            for obj in record["objects"]:
                text = obj.get("attributes", {}).get("text")
                x1, y1, x2, y2 = obj["box"]
                inside = x1 > 2 and y1 > 2 and x2 < w - 2 and y2 < h - 2  # not cut by the frame edge
                if text and inside:
                    texts[text] += 1
        print(f"\nText read in {frames} frames of {source} "
              f"({len(texts)} distinct lines, most frequent first):")
        if unreadable:
            print(f"  ({unreadable} line(s) of {path.name} are not JSON and were skipped)")
        for text, n in texts.most_common(SHOWN):
            print(f"  {n:4d}x  {text}")
        video = path.with_suffix(".mp4")
        print(f"\nannotated video: {video.resolve() if video.exists() else '(none)'}")
        print(f"metadata (JSON Lines): {path.resolve()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
