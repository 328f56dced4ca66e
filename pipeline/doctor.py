"""``vapipe doctor``: what every runtime in the process is set to use, and the thread plan.

Sections: cores, environment variables that change thread pools, OpenVINO
(version, devices, defaults, what a compiled model chooses), FFmpeg/PyAV
(versions, decoder thread defaults, threads a decoder really starts),
OpenCV, numpy's BLAS, ONNX Runtime and PyTorch when installed, and the plan
for a pipeline.  Lines starting with ``warning:`` name oversubscription.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["collect", "format_report", "warnings_for", "THREAD_ENV_VARS"]

THREAD_ENV_VARS = ("OMP_NUM_THREADS", "OMP_THREAD_LIMIT", "OMP_PROC_BIND", "KMP_AFFINITY", "GOMP_CPU_AFFINITY",
                   "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE", "MKL_NUM_THREADS", "MKL_DYNAMIC", "BLIS_NUM_THREADS",
                   "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS", "NUMEXPR_MAX_THREADS", "TBB_NUM_THREADS",
                   "OPENCV_FOR_THREADS_NUM", "OPENCV_OPENCL_RUNTIME", "ORT_NUM_THREADS", "TORCH_NUM_THREADS")
#: variables whose value is a thread count (compared with the cores)
_COUNT_VARS = ("OMP_NUM_THREADS", "OMP_THREAD_LIMIT", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
               "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS", "NUMEXPR_MAX_THREADS", "TBB_NUM_THREADS",
               "OPENCV_FOR_THREADS_NUM")


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _threads_now() -> int | None:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return None


def _cores() -> dict[str, Any]:
    from .threads import available_cores, cgroup_cpu_quota

    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    return {"available": available_cores(), "affinity": affinity, "cpu_count": os.cpu_count(),
            "cgroup_quota": cgroup_cpu_quota()}


def _openvino(compile_probe: bool = True) -> dict[str, Any]:
    try:
        import openvino as ov
    except ImportError as exc:  # pragma: no cover - core dependency
        return {"error": str(exc)}
    from .devices import list_devices, resolve_device

    core = ov.Core()
    out: dict[str, Any] = {"version": ov.get_version(), "available_devices": list(core.available_devices),
                           "devices": list_devices(core)}
    if compile_probe:
        probes = []
        for dev in core.available_devices:
            for hint in ("THROUGHPUT", "LATENCY"):
                probes.append({"hint": hint, **resolve_device(core, dev, hint)})
        out["compiled_tiny_model"] = probes
    return out


def _ffmpeg() -> dict[str, Any]:
    try:
        import av
    except ImportError as exc:  # pragma: no cover
        return {"error": str(exc)}
    out: dict[str, Any] = {"pyav": av.__version__, "ffmpeg": getattr(av, "ffmpeg_version_info", None),
                           "libavcodec": ".".join(map(str, av.library_versions.get("libavcodec", ())))}
    try:
        ctx = av.CodecContext.create("h264", "r")
        out["h264_decoder_defaults"] = {"thread_count": ctx.thread_count, "thread_type": str(ctx.thread_type)}
    except Exception as exc:  # noqa: BLE001
        out["h264_decoder_defaults"] = {"error": str(exc)}
    out["h264_auto_threads_started"] = _decoder_threads_started()
    return out


def _decoder_threads_started() -> dict[str, Any] | None:
    """Encode a tiny H.264 clip in memory, decode it with thread_count 0 (auto) and 1,
    and count the threads each decoder added to the process."""
    import io

    try:
        import av
        import numpy as np

        buf = io.BytesIO()
        with av.open(buf, "w", format="mp4") as dst:
            st = dst.add_stream("libx264", rate=25)
            st.width, st.height, st.pix_fmt = 64, 64, "yuv420p"
            st.codec_context.thread_count = 1
            for i in range(4):
                img = np.full((64, 64, 3), i * 40, np.uint8)
                for pkt in st.encode(av.VideoFrame.from_ndarray(img, format="bgr24")):
                    dst.mux(pkt)
            for pkt in st.encode(None):
                dst.mux(pkt)
        out: dict[str, Any] = {}
        for threads in (1, 0):  # auto last: its threads may outlive the container a moment
            buf.seek(0)
            before = _threads_now()
            with av.open(buf, "r") as src:
                s = src.streams.video[0]
                s.codec_context.thread_count = threads
                s.codec_context.thread_type = "AUTO"
                for _ in src.decode(s):
                    during = _threads_now()
                    break
            if before is not None and during is not None:
                out["auto" if threads == 0 else str(threads)] = max(0, during - before)
        return out
    except Exception:  # noqa: BLE001 - informational only
        return None


def _opencv() -> dict[str, Any]:
    import cv2

    framework = None
    for line in cv2.getBuildInformation().splitlines():
        if "Parallel framework" in line:
            framework = line.split(":", 1)[1].strip()
    return {"version": cv2.__version__, "threads": cv2.getNumThreads(), "cpus": cv2.getNumberOfCPUs(),
            "parallel_framework": framework}


def _blas() -> dict[str, Any]:
    import numpy as np

    out: dict[str, Any] = {"numpy": np.__version__}
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        out["blas"] = f"{blas.get('name')} {blas.get('version', '')}".strip()
    except Exception:  # noqa: BLE001
        pass
    if _installed("threadpoolctl"):
        from threadpoolctl import threadpool_info

        # a process can hold several copies of one library (numpy's and OpenCV's OpenBLAS): name the owner
        out["threadpools"] = [{"api": p.get("user_api"), "library": p.get("internal_api"),
                               "threads": p.get("num_threads"), "owner": _pool_owner(p.get("filepath") or "")}
                              for p in threadpool_info()]
    else:
        out["threadpools"] = "unknown (install threadpoolctl to see BLAS/OpenMP threads)"
    return out


def _pool_owner(path: str) -> str:
    """The package a shared library came with: ``.../numpy.libs/libscipy_openblas.so`` -> numpy."""
    parent = Path(path).parent.name
    return parent[:-len(".libs")] if parent.endswith(".libs") else Path(path).name


def _onnxruntime() -> dict[str, Any] | None:
    if not _installed("onnxruntime"):
        return None
    import onnxruntime as ort

    opts = ort.SessionOptions()
    return {"version": ort.__version__, "providers": ort.get_available_providers(),
            "default_intra_op_threads": opts.intra_op_num_threads or "0 (one per physical core)",
            "default_inter_op_threads": opts.inter_op_num_threads or "0 (one per physical core)"}


def _torch() -> dict[str, Any] | None:
    if not _installed("torch"):
        return None
    import torch

    return {"version": torch.__version__, "threads": torch.get_num_threads(),
            "interop_threads": torch.get_num_interop_threads()}


def collect(pipeline: str | None = None, cores: int | None = None, sources: int | list[str] = 1,
            config_path: str | None = None, compile_probe: bool = True) -> dict[str, Any]:
    """Everything the report shows, as plain data.  ``sources``: URIs to plan for (their
    decode cost is measured or read from the cost cache), or only how many."""
    from .threads import plan_threads

    info: dict[str, Any] = {"python": sys.version.split()[0], "cores": _cores(),
                            "env": {k: os.environ.get(k) for k in THREAD_ENV_VARS},
                            "openvino": _openvino(compile_probe), "ffmpeg": _ffmpeg(), "opencv": _opencv(),
                            "blas": _blas(), "onnxruntime": _onnxruntime(), "torch": _torch()}
    if pipeline:
        from .config import load_config
        from .graph import build_graph
        from .threads import plan_for_graph

        cfg = load_config(config_path, check_files=False) if config_path else None
        if cfg is None:
            from .pipeline_file import find_pipeline_file

            config_path = find_pipeline_file().path
            cfg = load_config(config_path, check_files=False)
        graph = build_graph(cfg.get(pipeline), config_path)
        from .costs import CostCache, check_key

        cache = CostCache()
        plan = plan_for_graph(graph, sources, cores, costs=cache)
        info["plan"] = {"pipeline": pipeline, "summary": plan.summary(), **plan.as_dict()}
        info["last_check"] = cache.get(check_key(pipeline))
    else:
        plan = plan_threads(cores, sources if isinstance(sources, int) else len(sources), ())
        info["plan"] = {"pipeline": None, "summary": plan.summary(), **plan.as_dict()}
    info["warnings"] = warnings_for(info)
    return info


def warnings_for(info: dict[str, Any]) -> list[str]:
    """Oversubscription and other thread problems found in ``info``."""
    cores = info["plan"]["cores"] if info.get("plan") else info["cores"]["available"]
    have = info["cores"]["available"]
    out = []
    for key in _COUNT_VARS:
        value = info["env"].get(key)
        if value is None:
            continue
        try:
            n = int(str(value).split(",")[0])
        except ValueError:
            continue
        if n > have:
            out.append(f"{key}={value} is larger than the {have} cores available: oversubscription")
    plan = info.get("plan")
    if plan and plan.get("oversubscribed"):
        out.append(f"thread plan: threads set by the user ({', '.join(plan['user_set'])}) exceed the "
                   f"{plan['cores']} cores: oversubscription")
    last = info.get("last_check")
    if last and str(last.get("status", "")).startswith("plan does not fit"):
        out.append(f"last run of {plan['pipeline']}: {last['status']}")
    if cores > have:
        out.append(f"--cores {cores} is more than the {have} cores this process may use")
    cv = info["opencv"]["threads"]
    if cv > have:
        out.append(f"OpenCV uses {cv} threads on {have} cores (vapipe run sets {plan['cv2_threads'] if plan else 1})")
    torch = info.get("torch")
    if torch and torch["threads"] > have:
        out.append(f"PyTorch uses {torch['threads']} intra-op threads on {have} cores")
    for probe in info["openvino"].get("compiled_tiny_model", []):
        threads = probe.get("INFERENCE_NUM_THREADS")
        if isinstance(threads, int) and threads > have:
            out.append(f"OpenVINO {probe['device']} {probe['hint']} uses {threads} threads on {have} cores")
    return out


def format_report(info: dict[str, Any]) -> str:
    c = info["cores"]
    lines = ["cores", f"  available: {c['available']} (affinity {c['affinity']}, cpu_count {c['cpu_count']}, "
             f"cgroup quota {c['cgroup_quota'] if c['cgroup_quota'] is not None else 'none'})"]
    lines.append("environment")
    env_set = {k: v for k, v in info["env"].items() if v is not None}
    lines += [f"  {k}={v}" for k, v in env_set.items()] or ["  (no thread variables set)"]
    ov = info["openvino"]
    lines.append(f"openvino {ov.get('version', '?')}")
    if "error" in ov:
        lines.append(f"  error: {ov['error']}")
    else:
        lines.append(f"  available devices: {', '.join(ov['available_devices']) or 'none'}")
        for d in ov["devices"]:
            lines.append(f"  {d['device']}: {d.get('FULL_DEVICE_NAME', '?')}")
            lines += [f"    {k}: {_fmt(v)}" for k, v in d.items() if k not in ("device", "FULL_DEVICE_NAME")]
        for p in ov.get("compiled_tiny_model", []):
            if "error" in p:
                lines.append(f"  compiled {p['device']} {p['hint']}: error: {p['error']}")
                continue
            lines.append(f"  compiled {p['device']} {p['hint']}: NUM_STREAMS {p.get('NUM_STREAMS', '?')}, "
                         f"INFERENCE_NUM_THREADS {p.get('INFERENCE_NUM_THREADS', '?')}, "
                         f"OPTIMAL_NUMBER_OF_INFER_REQUESTS {p.get('OPTIMAL_NUMBER_OF_INFER_REQUESTS', '?')}")
    ff = info["ffmpeg"]
    lines.append(f"ffmpeg {ff.get('ffmpeg', '?')} (PyAV {ff.get('pyav', '?')}, libavcodec {ff.get('libavcodec', '?')})")
    lines.append(f"  h264 decoder defaults: {_fmt(ff.get('h264_decoder_defaults', {}))} (0 = automatic)")
    started = ff.get("h264_auto_threads_started")
    if started:
        lines.append("  threads a decoder starts: " + ", ".join(f"thread_count {k}: {v}" for k, v in started.items()))
    cv = info["opencv"]
    lines.append(f"opencv {cv['version']}")
    lines.append(f"  threads: {cv['threads']} (cpus {cv['cpus']}, framework {cv['parallel_framework']})")
    b = info["blas"]
    lines.append(f"numpy {b['numpy']} (BLAS {b.get('blas', '?')})")
    tp = b["threadpools"]
    if isinstance(tp, str):
        lines.append(f"  threads: {tp}")
    else:
        lines += [f"  {p['api']} {p['library']} ({p.get('owner') or '?'}): {p['threads']} threads" for p in tp] or ["  no thread pools loaded"]
    ort = info.get("onnxruntime")
    lines.append(f"onnxruntime {ort['version']}" if ort else "onnxruntime: not installed")
    if ort:
        lines.append(f"  providers: {', '.join(ort['providers'])}; default intra-op "
                     f"{ort['default_intra_op_threads']}, inter-op {ort['default_inter_op_threads']}")
    t = info.get("torch")
    lines.append(f"torch {t['version']}" if t else "torch: not installed")
    if t:
        lines.append(f"  threads: {t['threads']} intra-op, {t['interop_threads']} inter-op")
    plan = info["plan"]
    lines.append(f"plan{' for ' + plan['pipeline'] if plan['pipeline'] else ''} ({plan['sources']} source(s))")
    lines += [f"  {line}" for line in plan["summary"].splitlines()]
    for name, cfg in plan["infer"].items():
        precision = plan.get("precision", {}).get(name)
        lines.append(f"  {name}: " + ", ".join(f"{k}={v}" for k, v in cfg.items())
                     + (f", INFERENCE_PRECISION_HINT={precision}" if precision else ""))
    lines += [f"  note: {n}" for n in plan["notes"]]
    last = info.get("last_check")
    if last:
        lines.append(f"  last run: {last.get('status')}")
        if last.get("replanned"):
            lines.append(f"  last run re-planned at {last['replanned']['at_s']} s: {last['replanned']['stages']}")
    lines += [f"warning: {w}" for w in info["warnings"]]
    return "\n".join(lines)


def _fmt(v: Any) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k} {x}" for k, x in v.items())
    return ", ".join(str(x) for x in v) if isinstance(v, list) else str(v)
