"""A plain-text progress bar on stderr, shown only for runs longer than a couple of seconds."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

WIDTH = 30


class ProgressBar:
    def __init__(
        self,
        label: str,
        *,
        stream: TextIO | None = None,
        delay_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label, self.stream, self.delay_s, self.clock = label, stream or sys.stderr, delay_s, clock
        self.started = clock()
        self.shown = False
        self.last_shown = -1.0

    def __call__(self, fraction: float) -> None:
        elapsed = self.clock() - self.started
        if elapsed < self.delay_s or (fraction < 1.0 and elapsed - self.last_shown < 0.5):
            return
        self.last_shown = elapsed
        fraction = min(1.0, max(0.0, fraction))
        filled = int(WIDTH * fraction)
        bar = "#" * filled + "." * (WIDTH - filled)
        self.stream.write(f"\r{self.label:<12} [{bar}] {fraction * 100:5.1f}% {elapsed:6.1f}s")
        self.stream.flush()
        self.shown = True

    def done(self) -> None:
        if self.shown:
            self(1.0)
            self.stream.write("\n")
            self.stream.flush()
