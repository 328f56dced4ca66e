"""A label filter that matches nothing says so: a stage given ``labels``/``on`` remembers
whether an object of those labels reached it and, if none did while others came, warns
at close naming the labels that did (a misspelt ``persn`` would otherwise be silent)."""

from __future__ import annotations

import logging
from typing import Iterable, Sequence

__all__ = ["LabelWatch", "LABELS_SHOWN"]

#: labels of other objects remembered for the warning
LABELS_SHOWN = 12

log = logging.getLogger("vapipe")


class LabelWatch:
    def __init__(self, stage: str, field: str, wanted: Sequence[str]) -> None:
        self.stage, self.field, self.wanted = stage, field, list(wanted)
        self.matched = 0
        self.others: set[str] = set()

    def see(self, labels: Iterable[str], matched: int) -> None:
        """Objects with ``labels`` reached the stage, ``matched`` of them of the wanted labels."""
        self.matched += matched
        if not self.matched and len(self.others) < LABELS_SHOWN:
            self.others.update(str(x) for x in list(labels)[:LABELS_SHOWN])

    def warn_if_unmatched(self) -> None:
        if self.matched == 0 and self.others:
            log.warning("stage %r: no object labelled %s reached it (%s: %s); objects that did: %s", self.stage,
                        " or ".join(repr(x) for x in self.wanted), self.field, self.wanted,
                        ", ".join(sorted(self.others)))
