"""``pipelines.yaml`` -> typed, validated pipeline specs.

Errors are :class:`ConfigError` with one line naming the file, the YAML line
and what is valid.  Validation reads no model and touches no device; it does
check that model files named in parameters exist.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import UnionType
from typing import Any, Container, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .outputs import may_share
from .registry import UnknownStageType, resolve_stage_type

__all__ = ["ConfigError", "ModelNotFound", "StageSpec", "PipelineSpec", "ConfigFile", "load_config", "load_pipeline",
           "parse_config", "validate_pipeline", "first_error", "DEFAULT_CONFIG"]

DEFAULT_CONFIG = "pipelines.yaml"
ErrorPolicy = Literal["stop", "skip", "restart"]


class ConfigError(ValueError):
    """A pipeline file is invalid; the message is one line with file and line."""

    def __init__(self, message: object = "") -> None:
        # Names and values quoted from the file may contain line breaks: keep them visible, on one line.
        super().__init__("\\n".join(str(message).splitlines()))


class ModelNotFound(ConfigError):
    """A stage names a model that is neither catalogued nor a file here (one users bring)."""


class StageSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    type: str = Field(min_length=1)
    params: dict[str, Any] = Field(default_factory=dict)
    inputs: list[str] | None = None
    on_error: ErrorPolicy | None = None
    line: int = Field(0, exclude=True)


class PipelineSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    stages: list[StageSpec] = Field(min_length=1)
    line: int = Field(0, exclude=True)
    #: served as NAME/VERSION by ``vapipe serve``
    version: str = "1"
    #: named parameters a client may set: NAME -> "STAGE.PARAM" or "STAGE.PARAM.KEY" (into a mapping parameter)
    parameters: dict[str, str] = Field(default_factory=dict)

    def stage(self, name: str) -> StageSpec:
        for s in self.stages:
            if s.name == name:
                return s
        raise ConfigError(f"pipeline {self.name!r} has no stage {name!r}; stages: "
                          f"{', '.join(s.name for s in self.stages)}")


class ConfigFile(BaseModel):
    path: str
    pipelines: dict[str, PipelineSpec]

    def get(self, name: str) -> PipelineSpec:
        if name not in self.pipelines:
            raise ConfigError(f"{self.path}: no pipeline {name!r}; valid: {', '.join(self.pipelines) or '(none)'}")
        return self.pipelines[name]


class _LineLoader(yaml.SafeLoader):
    """Safe loader that records the line of every mapping as key ``__line__``."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:  # YAML takes the last of repeated keys: here they are an error
        if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
            key = loader.construct_object(key_node)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first on line {seen[key]})", key_node.start_mark)
            seen[key] = key_node.start_mark.line + 1
    mapping = loader.construct_mapping(node, deep=deep)
    mapping["__line__"] = node.start_mark.line + 1
    return mapping


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
# YAML 1.1 reads on/off/yes/no as booleans, which would turn `on: [face]` into
# `True: [face]`; only true/false are booleans here (as in YAML 1.2).
_LineLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_LineLoader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                                  list("tTfF"))


def load_config(path: str | Path = DEFAULT_CONFIG, check_files: bool = True,
                exclude: Container[str] = ()) -> ConfigFile:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"pipeline file not found: {p}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read pipeline file {p}: {exc}") from None
    return parse_config(text, str(p), check_files=check_files, exclude=exclude)


def load_pipeline(path: str | Path, name: str, check_files: bool = True) -> PipelineSpec:
    """Pipeline ``name`` of the file at ``path``: every pipeline's structure is checked, model
    files only for this one (a pipeline whose model is missing does not stop the others)."""
    spec = load_config(path, check_files=False).get(name)
    validate_pipeline(spec, str(path), check_files=check_files)
    return spec


def parse_config(text: str, path: str = "<string>", check_files: bool = True,
                 exclude: Container[str] = ()) -> ConfigFile:
    """Parse and validate every pipeline but those named in ``exclude`` (skipped unread:
    their stage types are not imported)."""
    try:
        raw = yaml.load(text, Loader=_LineLoader)  # noqa: S506 - SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else path
        problem = getattr(exc, "problem", None) or (str(exc).splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"{where}: invalid YAML: {problem}") from None
    except RecursionError:
        raise ConfigError(f"{path}: invalid YAML: nested too deeply") from None
    except Exception as exc:  # noqa: BLE001 - explicit tags the constructor cannot convert (!!int abc, !!bool x)
        raise ConfigError(f"{path}: invalid YAML value: {type(exc).__name__}: {exc}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("pipelines"), dict):
        raise ConfigError(f"{path}: expected a mapping with key 'pipelines: {{NAME: {{description, stages}}}}'")
    unknown = [k for k in raw if k not in ("pipelines", "__line__")]
    if unknown:
        raise ConfigError(f"{path}: unknown top-level key {unknown[0]!r}; valid: pipelines")
    if not any(k != "__line__" for k in raw["pipelines"]):
        raise ConfigError(f"{path}: 'pipelines' is empty; give at least one pipeline: NAME: {{stages: [...]}}")
    pipelines: dict[str, PipelineSpec] = {}
    for name, body in raw["pipelines"].items():
        if name == "__line__" or str(name) in exclude:
            continue
        pipelines[str(name)] = _parse_pipeline(str(name), body, path, raw["pipelines"].get("__line__", 0),
                                               check_files)
    return ConfigFile(path=path, pipelines=pipelines)


def _parse_pipeline(name: str, body: Any, path: str, parent_line: int, check_files: bool) -> PipelineSpec:
    if not isinstance(body, dict):
        raise ConfigError(f"{path}:{parent_line}: pipeline {name!r} must be a mapping with 'description' and 'stages'")
    line = body.get("__line__", parent_line)
    stages_raw = body.get("stages")
    if not isinstance(stages_raw, list) or not stages_raw:
        raise ConfigError(f"{path}:{line}: pipeline {name!r} needs a non-empty list 'stages'")
    stages = []
    for i, st in enumerate(stages_raw):
        if not isinstance(st, dict):
            raise ConfigError(f"{path}:{line}: pipeline {name!r} stage #{i + 1} must be a mapping with 'name' and 'type'")
        st_line = st.get("__line__", line)
        try:
            clean = _strip_lines(st)
        except _RecursiveAlias:
            raise ConfigError(f"{path}:{st_line}: pipeline {name!r} stage #{i + 1}: a YAML alias refers to a list "
                              "that contains it") from None
        except RecursionError:
            raise ConfigError(f"{path}:{st_line}: pipeline {name!r} stage #{i + 1}: nested too deeply") from None
        unknown = [k for k in clean if k not in _STAGE_KEYS]
        if unknown:
            raise ConfigError(f"{path}:{st_line}: pipeline {name!r} stage #{i + 1}: unknown key {unknown[0]!r}; "
                              f"valid: {', '.join(_STAGE_KEYS)}")
        try:
            spec = StageSpec(**clean, line=st_line)
        except ValidationError as exc:
            raise ConfigError(f"{path}:{st_line}: pipeline {name!r} stage #{i + 1}: {first_error(exc)}") from None
        stages.append(spec)
    extra = {k: v for k, v in body.items() if k not in ("__line__", "stages", "description", "version",
                                                          "parameters")}
    if extra:
        raise ConfigError(f"{path}:{line}: pipeline {name!r}: unknown key {next(iter(extra))!r}; "
                          "valid: description, stages, version, parameters")
    version = body.get("version", 1)
    if not isinstance(version, (int, str)) or isinstance(version, bool) or not re.fullmatch(r"[A-Za-z0-9._-]+",
                                                                                             str(version)):
        raise ConfigError(f"{path}:{line}: pipeline {name!r}: version must be a number or a word "
                          f"([A-Za-z0-9._-]), got {_short(version)}")
    declared = _strip_lines(body.get("parameters") or {})
    if not isinstance(declared, dict) or not all(isinstance(v, str) for v in declared.values()):
        raise ConfigError(f"{path}:{line}: pipeline {name!r}: parameters must map NAME to 'STAGE.PARAM'")
    spec = PipelineSpec(name=name, description=str(body.get("description", "")), stages=stages, line=line,
                        version=str(version), parameters={str(k): v for k, v in declared.items()})
    validate_pipeline(spec, path, check_files=check_files)
    for pname, target in spec.parameters.items():
        stage_name, _, param = target.partition(".")
        if stage_name not in {s.name for s in spec.stages} or not param:
            raise ConfigError(f"{path}:{line}: pipeline {name!r} parameter {pname!r}: target {target!r} must be "
                              f"STAGE.PARAM with a stage of: {', '.join(s.name for s in spec.stages)}")
    return spec


def validate_pipeline(spec: PipelineSpec, path: str = "<string>", check_files: bool = True) -> None:
    """Check stage types, parameters and (optionally) model files; build-time only."""
    seen: set[str] = set()
    writers: dict[str, tuple[str, str | None]] = {}  # a sink's path template -> (stage, its sharing)
    for st in spec.stages:
        where = f"{path}:{st.line}: pipeline {spec.name!r} stage {st.name!r}"
        if st.name in seen:
            raise ConfigError(f"{where}: duplicate stage name")
        seen.add(st.name)
        try:
            cls = resolve_stage_type(st.type)
        except UnknownStageType as exc:
            raise ConfigError(f"{where}: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - importing a user's module may raise anything
            raise ConfigError(f"{where}: stage type {st.type!r} cannot be loaded: {type(exc).__name__}: {exc}") \
                from None
        try:
            params = cls.Params(**st.params)
        except ValidationError as exc:
            raise ConfigError(f"{where}: {first_error(exc, cls.Params)}") from None
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"{where}: {exc}") from None
        _check_own_file(cls, params, st.name, where, writers)
        if check_files and isinstance(getattr(params, "model", None), str):
            from .models import MODEL_FORMS, UnknownModelError, models_dir, resolve_model

            try:
                resolve_model(params.model)
            except UnknownModelError as exc:  # a model the user brings: say how to give it
                raise ModelNotFound(f"{where}: model {exc.name!r} is not in the catalogue nor in {models_dir()}; "
                                  f"run with --set {st.name}.model=PATH ({MODEL_FORMS})") from None
            except FileNotFoundError as exc:
                raise ConfigError(f"{where}: {exc}") from None
            except (OSError, ValueError) as exc:  # e.g. a name too long for the file system
                raise ConfigError(f"{where}: model {_short(params.model)}: {type(exc).__name__}: "
                                  f"{exc.strerror if isinstance(exc, OSError) and exc.strerror else exc}") from None


def _check_own_file(cls: Any, params: Any, name: str, where: str,
                    writers: dict[str, tuple[str, str | None]]) -> None:
    """ConfigError if a sink's path template is another sink's of the pipeline (every camera's
    two sinks would write one file) and they do not share files by design."""
    template = getattr(params, "path", None)
    if getattr(cls, "kind", "") != "sink" or not isinstance(template, str):
        return
    key = template.replace("{name}", name)
    sharing = cls.file_sharing(params)
    if key in writers:
        other, other_sharing = writers[key]
        if not may_share(sharing, other_sharing):
            raise ConfigError(f"{where}: writes the file stage {other!r} writes ({template!r}); give each its own "
                              "path, e.g. {output}/{source}-{name}.EXT")
    writers[key] = (name, sharing)


#: keys a stage may have in the file (``line`` is recorded by the loader)
_STAGE_KEYS = tuple(k for k in StageSpec.model_fields if k != "line")


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


class _RecursiveAlias(ValueError):
    """A YAML alias that refers to a list containing it (``&a [*a]``)."""


def _strip_lines(value: Any, _inside: frozenset[int] = frozenset()) -> Any:
    """``value`` without the loader's ``__line__`` keys; raises _RecursiveAlias on a cycle."""
    if isinstance(value, (dict, list)):
        if id(value) in _inside:
            raise _RecursiveAlias
        _inside = _inside | {id(value)}
    if isinstance(value, dict):
        return {k: _strip_lines(v, _inside) for k, v in value.items() if k != "__line__"}
    if isinstance(value, list):
        return [_strip_lines(v, _inside) for v in value]
    return value


def first_error(exc: ValidationError, model: type[BaseModel] | None = None) -> str:
    """One line for the first error of ``exc`` (an unknown key before any other: a misspelt name
    also leaves the intended one missing): the parameter's dotted name and the reason; for an
    unknown key, the keys valid there when ``model`` (the parameters' model) is given."""
    errors = exc.errors()
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])  # a typo: name it first
    loc = ".".join(str(p) for p in err["loc"])
    if err["type"] == "extra_forbidden":
        valid = ", ".join(_names_at(model, err["loc"][:-1])) if model is not None else ""
        return f"unknown parameter {loc!r}" + (f"; valid: {valid}" if valid else "")
    if err["type"] == "missing":
        return f"missing required parameter {loc!r}"
    msg = err["msg"]
    if err["type"] == "value_error" and "error" in err.get("ctx", {}):  # a validator's own message
        msg = str(err["ctx"]["error"])
    return f"parameter {loc!r}: {msg} (got {_short(err.get('input'))})" if loc else msg


def _names_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The keys valid where ``loc`` points in ``model`` (a nested model's, e.g. ``reconnect`` or
    ``zones.NAME``), as the YAML names them (aliases where they have one); none elsewhere."""
    kind: Any = model
    for key in (*loc, None):
        args = [a for a in get_args(kind) if a is not type(None)]
        if get_origin(kind) in (Union, UnionType) and len(args) == 1:
            kind = args[0]  # X | None
        if key is None:
            break
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            fields = kind.model_fields
            field = fields.get(str(key)) or next((f for f in fields.values() if f.alias == key), None)
            kind = field.annotation if field is not None else None
        else:  # a key of a mapping or an item of a list
            kind = args[-1] if args else None
    if not (isinstance(kind, type) and issubclass(kind, BaseModel)):
        return []
    return [f.alias or n for n, f in kind.model_fields.items()]
