"""Model adapters (input normalisation + output decoding) per model family."""

from .base import DECODERS, DetectorAdapter, Letterbox, RoiAdapter, register

__all__ = ["DECODERS", "DetectorAdapter", "Letterbox", "RoiAdapter", "register", "load_adapters"]


def load_adapters() -> None:
    """Import the built-in adapter modules so that they register themselves."""
    import importlib
    import pkgutil

    for info in pkgutil.iter_modules(__path__):
        if info.name not in ("base",):
            importlib.import_module(f"{__name__}.{info.name}")
