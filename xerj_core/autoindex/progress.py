"""How a run's progress is shown: a bar with total, rate and ETA on a terminal, a line per N files when piped.

The bar is ``tqdm``'s (rate and ETA smoothing, terminal width, redraw
throttling are its job, not ours). Piped output (a log file, CI) gets no
carriage returns: one plain line every :data:`LINE_EVERY` files and a last one.
"""

from __future__ import annotations

import time
from typing import IO, Any

LINE_EVERY = 500


class RunProgress:
    """A ``progress(event, count)`` callback for :func:`xerj_core.autoindex.pipeline.run`."""

    def __init__(self, stream: IO[str], *, terminal: bool, every: int = LINE_EVERY, min_interval: float = 0.1) -> None:
        self.stream = stream
        self.terminal = terminal
        self.every = every
        self.counts = {"files": 0, "documents": 0, "edges": 0}
        self.total: int | None = None
        self.started = time.monotonic()
        self._next_line = every
        self._bar: Any = None
        self.min_interval = min_interval

    def __call__(self, event: str, count: int) -> None:
        if event == "total":
            self.total = count
            if self.terminal:
                from tqdm import tqdm

                self._bar = tqdm(total=count, unit="file", file=self.stream, dynamic_ncols=True, leave=False,
                                 desc="autoindex", mininterval=self.min_interval)
            return
        self.counts[event] = self.counts.get(event, 0) + count
        if self._bar is not None:
            if event == "files":
                self._bar.update(count)
            self._bar.set_postfix(documents=self.counts["documents"], edges=self.counts["edges"], refresh=False)
        elif not self.terminal and event == "files" and self.counts["files"] >= self._next_line \
                and self.counts["files"] != self.total:  # the last line is close()'s
            self._next_line = (self.counts["files"] // self.every + 1) * self.every
            self.stream.write(self.line() + "\n")
            self.stream.flush()

    def line(self) -> str:
        """``autoindex: 500/5,580 files (9%), 120 files/s, ETA 42s, 1,234 documents``."""
        done = self.counts["files"]
        elapsed = max(time.monotonic() - self.started, 1e-6)
        rate = done / elapsed
        text = f"autoindex: {done:,}"
        if self.total:
            text += f"/{self.total:,} files ({100 * done // self.total}%)"
            if rate > 0 and done < self.total:
                text += f", {rate:,.0f} files/s, ETA {(self.total - done) / rate:,.0f}s"
        else:
            text += " files"
        return text + f", {self.counts['documents']:,} documents"

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif not self.terminal and self.counts["files"] >= self.every:
            self.stream.write(self.line() + f", {self.counts['edges']:,} edges: done\n")
            self.stream.flush()


__all__ = ["LINE_EVERY", "RunProgress"]
