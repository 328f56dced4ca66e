"""A deliberately slow user stage for backpressure tests: ``type: "tests.live.slow_stage:Slow"``."""

from __future__ import annotations

import time
from typing import ClassVar

from pydantic import Field

from pipeline.frame import Frame
from pipeline.stage import Params as StageParams
from pipeline.stage import Stage


class Slow(Stage):
    """Sleeps ``sleep_ms`` per frame after asking for its full-size BGR pixels (about 1 MB
    at 768x432), so that frames piling up anywhere would show in the process's memory."""

    needs_image: ClassVar[bool] = True

    class Params(StageParams):
        sleep_ms: float = Field(50.0, ge=0)

    params: Params

    def process(self, frame: Frame) -> Frame | None:
        frame.image()
        time.sleep(self.params.sleep_ms / 1000.0)
        return frame
