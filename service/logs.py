"""Log lines of ``vapipe serve``: which instance a line comes from.

An instance's threads (its cameras', its start and its runner) are named
``{instance_id}|...`` (:func:`thread_prefix`); :class:`InstanceTag` puts
``[instance_id] `` before the lines they log, so two instances' cameras of the
same name stay apart in one log.
"""

from __future__ import annotations

import logging

__all__ = ["FORMAT", "InstanceTag", "thread_prefix"]

SEPARATOR = "|"
FORMAT = "%(levelname)s %(name)s: %(instance)s%(message)s"


def thread_prefix(instance_id: str) -> str:
    """The start of the names of ``instance_id``'s threads."""
    return f"{instance_id}{SEPARATOR}"


class InstanceTag(logging.Filter):
    """Sets ``record.instance``: ``"[ID] "`` on lines from an instance's threads, else ``""``."""

    def filter(self, record: logging.LogRecord) -> bool:
        name = record.threadName or ""
        record.instance = f"[{name.split(SEPARATOR, 1)[0]}] " if SEPARATOR in name else ""
        return True
