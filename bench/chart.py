"""Charts of a bench result (matplotlib, PNG): FPS per mode with the machine's limit,
and latency against FPS — what ``requests`` trades (``--requests-sweep``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - after choosing the file-only backend

from .plan import ENGINE_MODES, sweep_requests  # noqa: E402

__all__ = ["draw_chart"]

COLOURS = {"vapipe": "#2e7d32", "variant": "#81c784", "engine": "#00838f", "baseline": "#1f77b4",
           "peer": "#ef6c00", "limit": "#9e9e9e"}


def _group(mode: str, peers: dict[str, Any]) -> str:
    if mode == "vapipe":
        return "vapipe"
    if mode in ENGINE_MODES:   # vapipe on another inference engine
        return "engine"
    if mode.startswith("vapipe"):
        return "variant"
    if mode in peers:
        return "peer"
    return "limit" if mode.endswith("-alone") else "baseline"


def _bars(ax: Any, result: dict[str, Any]) -> None:
    modes = [m for m in result["modes"] if sweep_requests(m) is None]
    fps = [result["modes"][m]["fps"] for m in modes]
    colours = [COLOURS[_group(m, result.get("peers", {}))] for m in modes]
    # The scale follows the pipelines and the limit: decoding alone can be 100x faster
    # than an inference-bound pipeline; its bar is cut at the top and labelled.
    scale = [v for m, v in zip(modes, fps) if not m.endswith("-alone")] + [result.get("limit_fps") or 0]
    top = max(max(scale) * 1.25, 1e-3) if max(scale) > 0 else max(fps + [1.0]) * 1.18
    bars = ax.bar(range(len(modes)), [min(v, top) for v in fps], color=colours)
    ax.bar_label(bars, labels=[f"{v:.1f}" + (" (cut)" if v > top else "") for v in fps], fontsize=8, padding=2)
    ax.set_xticks(range(len(modes)), modes, rotation=30, ha="right", fontsize=8)
    if "limit_fps" in result:
        ax.axhline(result["limit_fps"], color="#c62828", linestyle="--", linewidth=1)
        ax.annotate(f"limit {result['limit_fps']:.1f}", (-0.4, result["limit_fps"]), ha="left",
                    va="bottom", fontsize=8, color="#c62828")
    ax.set_ylabel("frames per second (all cameras), higher is better")
    ax.set_ylim(0, top * 1.08)
    ax.grid(axis="y", alpha=0.3)
    ax.set_title("throughput (median of rounds)", fontsize=10)


def _latency(ax: Any, result: dict[str, Any]) -> None:
    peers = result.get("peers", {})
    sweep = sorted((sweep_requests(m), m) for m in result["modes"] if sweep_requests(m) is not None)
    shown = False
    for mode, r in result["modes"].items():
        if sweep_requests(mode) is not None or r.get("latency_p50_ms") is None:
            continue
        colour = COLOURS[_group(mode, peers)]
        ax.plot([r["fps"], r["fps"]], [r["latency_p50_ms"], r["latency_p95_ms"]], color=colour, linewidth=1)
        ax.scatter([r["fps"]], [r["latency_p50_ms"]], color=colour, marker="o", s=28, zorder=3)
        ax.scatter([r["fps"]], [r["latency_p95_ms"]], color=colour, marker="^", s=28, zorder=3)
        ax.annotate(mode, (r["fps"], r["latency_p95_ms"]), textcoords="offset points", xytext=(4, 4), fontsize=7)
        shown = True
    if sweep:
        pts = [result["modes"][m] for _, m in sweep]
        ax.plot([p["fps"] for p in pts], [p["latency_p50_ms"] for p in pts], "o-", color="#6a1b9a", label="p50")
        ax.plot([p["fps"] for p in pts], [p["latency_p95_ms"] for p in pts], "^--", color="#6a1b9a", label="p95")
        for (n, _), p in zip(sweep, pts):
            ax.annotate(f"requests {n}", (p["fps"], p["latency_p50_ms"]), textcoords="offset points",
                        xytext=(4, -10), fontsize=7, color="#6a1b9a")
        ax.legend(fontsize=8, loc="upper left", title="vapipe --requests N", title_fontsize=8)
        shown = True
    if not shown:
        ax.text(0.5, 0.5, "no latency measured", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("frames per second (all cameras)")
    ax.set_ylabel("latency, decoded frame to results (ms): o p50, ^ p95")
    ax.grid(alpha=0.3)
    ax.set_title("latency against throughput", fontsize=10)


def draw_chart(result: dict[str, Any], path: str | Path) -> None:
    """Write the two charts of ``result`` (a bench result) side by side into ``path`` (PNG)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 5.5), gridspec_kw={"width_ratios": [3, 2]})
    try:
        _bars(left, result)
        _latency(right, result)
        sets = f"  --set {' --set '.join(result['sets'])}" if result.get("sets") else ""
        if result.get("engine", "openvino") != "openvino":
            sets += f"  --engine {result['engine']}"
        fig.suptitle(f"vapipe bench {result['pipeline']}: {Path(result['source']).name} {result['width']}x"
                     f"{result['height']}, {result['cameras']} camera(s), {result['cores']} cores, median of "
                     f"{result['rounds']} round(s){sets}", fontsize=11)
        failed = [c["check"] for c in result.get("checks", []) if not c["ok"]]
        ratios = "   ".join(f"{k} {v:.2f}x" for k, v in result.get("ratios", {}).items())
        fig.text(0.01, 0.01, ratios + (f"\nbelow target: {'; '.join(failed)}" if failed else ""), fontsize=8,
                 va="bottom")
        fig.tight_layout(rect=(0, 0.06, 1, 0.95))
        fig.savefig(str(path), dpi=100)
    finally:
        plt.close(fig)
