"""What a request may touch: sources, destination files, parameters; credentials kept out of sight.

* File sources and file destinations must resolve (symlinks followed, ``..``
  removed, ``%2e`` decoded) under one of the allowed directories; ``file://``
  URIs with a host other than ``localhost`` are refused.
* Stream sources must use a known scheme (``rtsp``, ``http``, ...); FFmpeg's
  other protocols (``concat:``, ``subfile:``, ``pipe:``, ...) can read local
  files and are refused.  Cameras are ``/dev/videoN``.
* Parameters that name files or devices (``path``, ``uri``, ``model`` paths,
  OpenVINO ``*_DIR``/``*PATH*`` properties) cannot be set through the API;
  models are catalogue names or files under the allowed directories.
* User names and passwords in URLs are replaced by ``***`` wherever a URI is shown.
"""

from __future__ import annotations

import hmac
import os
import re
from pathlib import Path
from typing import Any, Iterable
from urllib.parse import unquote, urlsplit, urlunsplit

from pipeline.redact import RedactingFilter, redact

__all__ = ["Forbidden", "Guard", "redact", "STREAM_SCHEMES", "RedactingFilter"]

STREAM_SCHEMES = ("rtsp", "rtsps", "rtmp", "rtmps", "http", "https", "udp", "srt", "rtp")
_CAMERA = re.compile(r"/dev/video[0-9]{1,3}")
#: stage parameters that name files, devices or sources: never settable through the API
PATH_PARAMS = ("path", "uri", "output", "cache_dir", "dir", "file")


class Forbidden(ValueError):
    """A request names something outside what the server allows (HTTP 403)."""


def _json_or_empty(path: Path) -> bool:
    """Whether ``path`` is empty or starts (past white space) as a JSON array or object does."""
    with path.open("rb") as fh:
        head = fh.read(4096).lstrip()
    return not head or head[:1] in (b"[", b"{")


class Guard:
    def __init__(self, allow_dirs: Iterable[str | Path] = (), allow_user_stages: bool = False,
                 token: str | None = None) -> None:
        dirs = [Path(os.path.realpath(d)) for d in (allow_dirs or [os.getcwd()])]
        self.allow_dirs = dirs
        self.allow_user_stages = allow_user_stages
        self.token = token

    # authentication ---------------------------------------------------------------------------
    def token_ok(self, presented: str | None) -> bool:
        if self.token is None:
            return True
        return presented is not None and hmac.compare_digest(presented.encode(), self.token.encode())

    # files --------------------------------------------------------------------------------------
    def allowed_path(self, raw: str, what: str) -> Path:
        """``raw`` (a path) resolved; Forbidden unless it lies under an allowed directory."""
        if "\x00" in raw:
            raise Forbidden(f"{what}: NUL character in path")
        real = Path(os.path.realpath(os.path.abspath(os.path.expanduser(raw) if raw.startswith("~/") else raw)))
        for d in self.allow_dirs:
            if real == d or d in real.parents:
                return real
        raise Forbidden(f"{what} {raw!r} is outside the allowed directories ({', '.join(map(str, self.allow_dirs))}); "
                        "start the server with --allow-dir")

    def source_uri(self, uri: str, what: str = "source.uri") -> str:
        """The URI to open for ``uri`` (file URIs become paths); Forbidden or ValueError otherwise."""
        uri = uri.strip()
        if not uri:
            raise ValueError(f"{what} is empty")
        if _CAMERA.fullmatch(uri):
            return uri
        if uri.startswith("testsrc://"):
            return uri
        if "://" not in uri and not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", uri):
            return str(self.allowed_path(uri, what))
        try:
            parts = urlsplit(uri)
        except ValueError as exc:  # e.g. an unclosed IPv6 bracket
            raise ValueError(f"{what} {redact(uri)!r}: {exc}; expected SCHEME://HOST[:PORT]/PATH") from None
        scheme = parts.scheme.lower()
        if scheme == "file":
            if parts.netloc not in ("", "localhost"):
                raise Forbidden(f"{what} {redact(uri)!r}: file URIs with a host are not allowed")
            if parts.query or parts.fragment:
                raise Forbidden(f"{what} {redact(uri)!r}: file URIs take no query or fragment")
            return str(self.allowed_path(unquote(parts.path), what))
        if scheme in STREAM_SCHEMES:
            if not parts.hostname:
                raise ValueError(f"{what} {redact(uri)!r}: no host")
            try:
                parts.port
            except ValueError:
                raise ValueError(f"{what} {redact(uri)!r}: the port must be a number 1-65535") from None
            return uri
        raise Forbidden(f"{what} {redact(uri)!r}: scheme {scheme + ':'!r} not allowed; valid: file://, "
                        f"{', '.join(s + '://' for s in STREAM_SCHEMES)}, testsrc://, /dev/videoN")

    def destination_path(self, raw: str, what: str = "destination.metadata.path") -> Path:
        """The file results go to: allowed, not a directory, and new, empty or JSON already (an
        existing file of another kind, a video say, is never written over or appended to)."""
        path = self.allowed_path(raw, what)
        try:
            if path.is_dir():
                raise ValueError(f"{what} {raw!r} is a directory")
            if path.is_file() and not _json_or_empty(path):
                raise ValueError(f"{what} {raw!r} exists and is not a JSON file; give a new file (e.g. .jsonl) "
                                 "or one that holds results already")
        except OSError as exc:
            raise ValueError(f"{what} {raw!r}: {exc.strerror or exc}") from None
        return path

    # parameters ---------------------------------------------------------------------------------
    def parameter(self, key: str, param: str, value: Any) -> Any:
        """Check one stage parameter set through the API; returns the value to use."""
        low = param.lower()
        if low in PATH_PARAMS or low.endswith(("_path", "_dir", "_file")):
            raise Forbidden(f"parameters.{key}: {param!r} names a file and cannot be set through the API")
        if low == "model" and isinstance(value, str):
            from pipeline.model_catalog import MODELS

            if value not in MODELS:  # a file: only under the allowed directories
                return str(self.allowed_path(value, f"parameters.{key}"))
        if low == "config" and isinstance(value, dict):
            for k in value:
                up = str(k).upper()
                if "DIR" in up or "PATH" in up or "FILE" in up:
                    raise Forbidden(f"parameters.{key}: OpenVINO property {k!r} names a file and cannot be set "
                                    "through the API")
        return value

    def stage_type(self, pipeline: str, stage: str, type_name: str) -> None:
        if ":" in type_name and not self.allow_user_stages:
            raise Forbidden(f"pipeline {pipeline!r} stage {stage!r} is a user stage ({type_name}); start the "
                            "server with --allow-user-stages to run it")


def strip_credentials(uri: str) -> str:
    """``uri`` without user and password (for ids and labels)."""
    parts = urlsplit(uri)
    if "@" not in parts.netloc:
        return uri
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
