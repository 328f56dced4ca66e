"""The bench result as a text table, and the charts (:mod:`bench.chart`) when matplotlib is there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .plan import ENGINE_MODES

__all__ = ["format_table", "write_chart"]


def _fmt(v: Any, spec: str = ".1f") -> str:
    return "-" if v is None else format(v, spec)


def _mode_lines(modes: dict[str, Any]) -> list[str]:
    lines = [f"{'mode':<17} {'fps':>7} {'fps/camera':>22} {'p50 ms':>7} {'p95 ms':>7} {'cpu':>5}   rounds"]
    for m, r in modes.items():
        per = r.get("fps_per_camera") or []
        per_s = " ".join(f"{x:.1f}" for x in per) if len(per) <= 4 else f"{min(per):.1f}..{max(per):.1f}"
        cpu = r.get("cpu_util")
        lines.append(f"{m:<17} {r['fps']:>7.1f} {per_s:>22} {_fmt(r.get('latency_p50_ms')):>7} "
                     f"{_fmt(r.get('latency_p95_ms')):>7} {('-' if cpu is None else f'{cpu:.0%}'):>5}   "
                     + ", ".join(f"{x:.1f}" for x in r["rounds"]))
    return lines


def _limit_line(result: dict[str, Any]) -> str:
    inf = result["modes"].get("infer-alone", {})
    extra = f"detector {inf.get('detect_fps', 0):.0f}/s"
    for stage, fps in (inf.get("region_fps") or {}).items():
        extra += f", {stage} {fps:.0f}/s x {inf['objects_per_frame'].get(stage, 0):.2f} per frame"
    return f"{'limit':<17} {result['limit_fps']:>7.1f}   = 1/(1/decode-alone + 1/infer-alone)  (infer-alone: {extra})"


def _cpu_ms_per_frame(result: dict[str, Any], mode: str) -> float | None:
    r = result["modes"].get(mode) or {}
    if not r.get("fps") or r.get("cpu_util") is None:
        return None
    return 1000.0 * r["cpu_util"] * result["cores"] / r["fps"]


def _work_line(result: dict[str, Any]) -> str:
    w = result["modes"]["vapipe"]["work_ms"]
    alone = [(m, _cpu_ms_per_frame(result, m)) for m in ("decode-alone", "infer-alone")]
    parts = ", ".join(f"{m} {ms:.2f}" for m, ms in alone if ms is not None)
    return (f"{'work-bound':<17} {result['work_bound_fps']:>7.1f}   = {result['cores']} cores / vapipe's CPU per frame: "
            f"decode {w['decode']:.2f} + host {w['host']:.2f} + models {w['models']:.2f} = {sum(w.values()):.2f} ms"
            + (f" ({parts} ms CPU per frame)" if parts else ""))


def format_table(result: dict[str, Any]) -> str:
    """Modes (median FPS, per camera, latency, CPU, every round), the limit, thread
    plans, ratios, targets, agreement with vapipe and reading accuracy."""
    sets = f", --set {' --set '.join(result['sets'])}" if result.get("sets") else ""
    lines = [f"{result['pipeline']}: {Path(result['source']).name} {result['width']}x{result['height']}, "
             f"{result['cameras']} camera(s) x {result['frames']} frames, {result['cores']} cores, "
             f"median of {result['rounds']} round(s){sets}"]
    lines += _mode_lines(result["modes"])
    if "limit_fps" in result:
        lines.append(_limit_line(result))
    if "work_bound_fps" in result:
        lines.append(_work_line(result))
    shown: list[str] = []
    for m, r in result["modes"].items():   # each distinct thread plan once
        if r.get("threads") and r["threads"] not in shown:
            same = [o for o, x in result["modes"].items() if o != m and x.get("threads") == r["threads"]]
            lines.append(f"{m + ':':<18}{r['threads']}" + (f"\n  (also {', '.join(same)})" if same else ""))
            shown.append(r["threads"])
    for m in ("vapipe", *ENGINE_MODES):
        if result["modes"].get(m, {}).get("plan_check"):
            lines.append(f"{m + ' (last round)':<18} {result['modes'][m]['plan_check']}")
    for peer, info in result.get("peers", {}).items():
        version = result["modes"][peer].get("version", peer)
        same = "the same model files as vapipe" if info["same_models"] else "OTHER MODEL FILES than vapipe"
        lines.append(f"{peer + ':':<18}{version}: {info['description']}; {same}")
    for peer, why in result.get("peers_skipped", {}).items():
        lines.append(f"{peer + ':':<18}not run: {why}")
    if result.get("ratio_rounds"):
        lines.append("ratios: the median of the rounds' own ratios (each round runs every mode side by side); "
                     "then each round's, and the ratio of the median FPS")
    for key, value in result.get("ratios", {}).items():
        each = result.get("ratio_rounds", {}).get(key)
        medians = result.get("ratios_of_medians", {}).get(key)
        detail = f"   rounds {' '.join(f'{x:.2f}' for x in each)}; of medians {medians:.2f}x" if each else ""
        lines.append(f"{key:<26} {value:5.2f}x{detail}")
    for c in result.get("checks", []):
        lines.append(f"target {c['check']:<42} {c['value']:6.2f}  {'ok' if c['ok'] else 'BELOW TARGET'}")
    for key, a in result.get("agreement", {}).items():
        lm = f", landmarks {a['landmarks_mean_abs_px']:.2f} px" if "landmarks_mean_abs_px" in a else ""
        tx = f", same text {a['texts_equal']}/{a['texts']}" if "texts" in a else ""
        lines.append(f"same objects: {key:<24} {a['matched']}/{a['objects_ref']} matched (vapipe), "
                     f"{a['objects']} found, mean IoU {_fmt(a['mean_iou'], '.3f')}{lm}{tx} over {a['frames']} frames")
    for m, a in result.get("accuracy", {}).items():
        if a["lines"]:
            lines.append(f"lines read: {m:<18} {a['read']}/{a['lines']} = {a['accuracy']:.1%} "
                         f"(exact with spaces {a['exact_accuracy']:.1%}) over {a['frames']} frames")
    return "\n".join(lines)


def write_chart(result: dict[str, Any], path: str | Path) -> str:
    """Draw ``path`` (PNG) and return it, or say why it was not drawn (no matplotlib)."""
    try:
        from .chart import draw_chart
    except ImportError as exc:
        return f"not drawn ({exc.name} is missing: pip install 'vapipe[bench]')"
    draw_chart(result, path)
    return str(path)
