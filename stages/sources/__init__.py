"""Readers behind the decode stage: video containers and streams (PyAV), image
folders and synthetic scenes.  Each reader splits its work into ``units()``
(reader thread: packets as they arrive) and ``decode(unit)`` (decoder thread)."""

from .base import LOOP, Decoded, Reader, SourceError, is_live_uri
from .folder import IMAGE_SUFFIXES, FolderReader
from .scene import SceneReader
from .video import VIDEO_SUFFIXES, VideoReader

__all__ = ["LOOP", "Decoded", "Reader", "SourceError", "is_live_uri", "IMAGE_SUFFIXES", "FolderReader",
           "SceneReader", "VIDEO_SUFFIXES", "VideoReader"]
