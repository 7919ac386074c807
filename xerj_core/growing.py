"""Arrays appended in place into buffers of doubling capacity, whose earlier views stay valid."""

from __future__ import annotations

from typing import Sequence

import numpy as np


class GrowingRows:
    """Per-row arrays appended in place into buffers of doubling capacity.

    Appending copies only the new rows, and a view of the first ``n`` rows
    handed out earlier stays valid while later rows land beyond it, because
    rows once appended are never written again (a larger buffer is a new
    array; views of the old one keep it).
    """

    __slots__ = ("arrays", "n")

    def __init__(self) -> None:
        self.arrays: tuple[np.ndarray, ...] = ()
        self.n = 0

    def append(self, parts: Sequence[np.ndarray]) -> None:
        need = self.n + len(parts[0])
        if not self.arrays or need > len(self.arrays[0]):
            capacity = max(need, 2 * self.n, 64)
            grown = []
            for i, part in enumerate(parts):
                buffer = np.empty((capacity, *part.shape[1:]), part.dtype)
                if self.arrays:
                    buffer[: self.n] = self.arrays[i][: self.n]
                grown.append(buffer)
            self.arrays = tuple(grown)
        for buffer, part in zip(self.arrays, parts):
            buffer[self.n: need] = part
        self.n = need

    def view(self, rows: int) -> tuple[np.ndarray, ...]:
        return tuple(array[:rows] for array in self.arrays)
