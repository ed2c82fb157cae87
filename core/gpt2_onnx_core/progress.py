"""Stage timing: library code announces stages, the CLI decides how to show them."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from gpt2_onnx_core.interrupts import raise_if_interrupted

__all__ = ["StageReporter", "Stages"]

# (stage name, "start" or "done", seconds elapsed in the stage)
StageReporter = Callable[[str, str, float], None]


@dataclass
class Stages:
    """Times named stages and tells an optional reporter when each starts and ends."""

    report: StageReporter | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the block as stage ``name``; an interrupt recorded before or during it ends the work here."""
        raise_if_interrupted()
        if self.report:
            self.report(name, "start", 0.0)
        start = time.perf_counter()
        yield
        raise_if_interrupted()
        elapsed = time.perf_counter() - start
        self.timings[name] = self.timings.get(name, 0.0) + elapsed
        if self.report:
            self.report(name, "done", elapsed)
