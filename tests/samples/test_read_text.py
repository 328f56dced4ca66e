"""samples/read_text.py, the last step of ``make demo``: it lists the lines an ``ocr`` run read."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from stages.testsrc import open_testsrc
from tests.cli import ROOT, cli_env, succeeded, vapipe

SAMPLE = ROOT / "samples" / "read_text.py"
TICKER = "testsrc://ticker?width=640&height=360&frames=12"


def _read_text(out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SAMPLE), str(out)], capture_output=True, text=True, timeout=60)


def _listed(stdout: str) -> dict[str, int]:
    """The lines the sample listed, with the frames each was read in."""
    return {m.group(2): int(m.group(1)) for m in re.finditer(r"^\s+(\d+)x  (.+)$", stdout, re.M)}


def test_it_lists_the_lines_a_real_ocr_run_read_and_only_lines_the_frames_show(
        tmp_path: Path, models_dir: Path) -> None:
    succeeded(vapipe(cli_env(models_dir), "run", "ocr", "--source", TICKER, "--output", tmp_path))
    proc = _read_text(tmp_path)
    assert proc.returncode == 0, proc.stderr
    listed = _listed(proc.stdout)
    scene, frames = open_testsrc(TICKER)
    truth: dict[str, int] = {}
    for seq in range(frames or 0):
        for line in scene.render(seq)[1]:
            truth[line.text] = truth.get(line.text, 0) + 1
    # listed most frequent first, each in at most every frame; the lines shown whole in every
    # frame are read in nearly all; a misread line may appear, but most reads are right
    counts = list(listed.values())
    assert counts == sorted(counts, reverse=True) and all(n <= frames for n in counts), listed
    always = [text for text, n in truth.items() if n == frames]
    assert always and all(listed.get(text, 0) >= 0.9 * frames for text in always), (listed, always)
    right = sum(n for text, n in listed.items() if text in truth)
    assert right >= 0.8 * sum(counts), (listed, truth)
    assert f"Text read in {frames} frames" in proc.stdout
    assert re.search(r"^annotated video: /\S+\.mp4$", proc.stdout, re.M), proc.stdout


def _record(source: str, objects: list[dict]) -> str:
    return json.dumps({"source": source, "seq": 0, "width": 640, "height": 360, "objects": objects})


def test_it_counts_lines_inside_the_frame_and_skips_events_cut_lines_and_a_torn_last_line(tmp_path: Path) -> None:
    sign = {"label": "text", "box": [100, 100, 300, 140], "attributes": {"text": "OPEN 24 HOURS"}}
    cut = {"label": "text", "box": [0, 200, 120, 240], "attributes": {"text": "PEN 24"}}  # at the left edge
    lines = [_record("cam", [sign, cut]), json.dumps({"event": "line_cross", "line": "door"}),
             _record("cam", [sign]), '{"source": "cam", "seq": 2, "wid']  # a run killed while it wrote
    (tmp_path / "cam.jsonl").write_text("\n".join(lines), encoding="utf-8")
    proc = _read_text(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert _listed(proc.stdout) == {"OPEN 24 HOURS": 2}
    assert "Text read in 2 frames of cam (1 distinct lines" in proc.stdout
    assert "1 line(s) of cam.jsonl are not JSON" in proc.stdout


def test_an_empty_metadata_file_and_an_empty_folder_are_reported_not_raised(tmp_path: Path) -> None:
    empty = _read_text(tmp_path)
    assert empty.returncode == 1 and f"no .jsonl files in {tmp_path}" in empty.stderr
    (tmp_path / "cam.jsonl").write_text("", encoding="utf-8")  # a source that gave no frame
    proc = _read_text(tmp_path)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "Text read in 0 frames of cam (0 distinct lines" in proc.stdout
