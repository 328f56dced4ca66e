"""Class names: from a list, a file, or the model's own metadata.

A labels file is one name per line (blank lines and ``#`` comments skipped), or a
JSON/YAML list ``[name, ...]`` or mapping ``{id: name, ...}`` (ids 0..n-1).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import yaml

__all__ = ["load_labels", "LabelsError", "label_name", "class_ids_for"]


class LabelsError(ValueError):
    """Labels that cannot be read or do not fit the model; one line naming the file."""


def load_labels(spec: str | Sequence[Any] | dict[Any, Any], where: str = "labels") -> list[str]:
    """Names indexed by class id, from a list/mapping or a file path (see module doc)."""
    if isinstance(spec, str):
        return _from_file(Path(spec).expanduser())
    if isinstance(spec, dict):
        return _from_mapping(spec, where)
    if isinstance(spec, (list, tuple)):
        return [str(v) for v in spec]
    raise LabelsError(f"{where}: expected a list of names or a file path, got {type(spec).__name__}")


def _from_file(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LabelsError(f"labels file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LabelsError(f"cannot read labels file {path}: {exc}") from None
    suffix = path.suffix.lower()
    if suffix in (".json", ".yaml", ".yml"):
        try:
            data = json.loads(text) if suffix == ".json" else yaml.safe_load(text)
        except (ValueError, yaml.YAMLError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise LabelsError(f"labels file {path}: invalid {suffix[1:].upper()}: {first}") from None
        if isinstance(data, dict) and "names" in data and isinstance(data["names"], (dict, list)):
            data = data["names"]  # an Ultralytics dataset/metadata YAML
        if isinstance(data, dict):
            return _from_mapping(data, f"labels file {path}")
        if isinstance(data, list):
            return [str(v) for v in data]
        raise LabelsError(f"labels file {path}: expected a list of names or a mapping {{id: name}}")
    names = [ln.strip() for ln in text.splitlines()]
    return [n for n in names if n and not n.startswith("#")]


def _from_mapping(data: dict[Any, Any], where: str) -> list[str]:
    try:
        by_id = {int(k): str(v) for k, v in data.items()}
    except (TypeError, ValueError):
        raise LabelsError(f"{where}: mapping keys must be class ids 0..n-1, got {list(data)[:5]!r}") from None
    if sorted(by_id) != list(range(len(by_id))):
        raise LabelsError(f"{where}: mapping keys must be the class ids 0, 1, ... without a gap (a name for "
                          f"every class of the model), got {sorted(by_id)[:10]!r}")
    return [by_id[i] for i in range(len(by_id))]


def label_name(labels: Sequence[str] | None, class_id: int) -> str:
    """The name of ``class_id``; ``#<id>`` when there is none (model_api's convention)."""
    if labels is not None and 0 <= class_id < len(labels):
        return labels[class_id]
    return f"#{class_id}"


def class_ids_for(wanted: Sequence[str | int], labels: Sequence[str] | None, where: str,
                  count: int | None = None, first_id: int = 0) -> list[int]:
    """Class ids of ``wanted`` names (or ids), ``labels[0]`` naming class ``first_id`` (1 when the
    names leave out a background class 0); an unknown name, or an id outside 0..``count``-1
    when the model's class count is known, is a one-line error naming the valid ones."""
    out = []
    for item in wanted:
        if isinstance(item, bool):
            raise LabelsError(f"{where}: {item!r} is not a class name or id")
        if isinstance(item, int):
            out.append(item)
            continue
        text = str(item)
        if labels is not None and text in labels:
            out.append(labels.index(text) + first_id)
        elif text.startswith("#") and text[1:].isdigit():
            out.append(int(text[1:]))
        else:
            if labels is None:
                raise LabelsError(f"{where}: {text!r} is not a label of this model (it has no names; give "
                                  "labels: or class ids)")
            shown = ", ".join(labels[:12]) + (f", ... ({len(labels)} names)" if len(labels) > 12 else "")
            raise LabelsError(f"{where}: {text!r} is not a label of this model; labels: {shown}")
    bad = [i for i in out if count is not None and not 0 <= i < count]
    if bad:
        raise LabelsError(f"{where}: class id {bad[0]} is out of range; valid: 0..{count - 1} "
                          f"(the model has {count} classes)")
    return out
