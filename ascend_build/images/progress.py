"""Where an hour-long source build is: files compiled of the total (from make's and
setuptools' own lines), time elapsed, an estimate of what is left, and ccache's hits at
the end; on failure, the first compiler error quoted. The log keeps every line."""
from __future__ import annotations

import re
import time
from collections import deque
from dataclasses import dataclass, field

# CMake's Makefile generator: "[ 42%] Building CXX object CMakeFiles/torch_npu.dir/...cpp.o"
_MAKE = re.compile(r"^\[\s*(\d+)%\]\s+Building (?:CXX|C) object ")
# setuptools / plain compiler calls: "... -c path/file.cpp -o ..."
_DIRECT = re.compile(r"\s-c\s+\S+\.(?:c|cc|cpp|cxx)\b")
_ERROR = re.compile(r"(?:^|\s)(?:fatal )?error:|^CMake Error|^make(?:\[\d+\])?: \*\*\*")
_HITS = re.compile(r"^\s*(?:cache )?hits?\b.*?(\d+)|^\s*cache hit \((?:direct|preprocessed)\)\s+(\d+)")


@dataclass
class Progress:
    """Fed the build's output line by line; says where it is every `every` files."""
    what: str
    every: int = 25
    clock: object = time.monotonic
    started: float = field(default=0.0)
    files: int = 0
    percent: int = 0
    first_error: str | None = None
    hits: int = 0
    _said: int = 0
    # when the last files started: what is left is estimated from the recent pace (a
    # build's first files are its largest generated ones)
    _recent: deque = field(default_factory=lambda: deque(maxlen=25))

    def __post_init__(self) -> None:
        self.started = self.clock()          # type: ignore[operator]

    def feed(self, line: str) -> str | None:
        """The line to show for `line`, if any (a progress line, or an error)."""
        text = line.rstrip("\n")
        m = _MAKE.match(text)
        if m:
            self.files += 1
            self.percent = int(m.group(1))
            self._recent.append(self.clock())          # type: ignore[operator]
        elif _DIRECT.search(text) and not text.startswith("ccache"):
            self.files += 1
            self._recent.append(self.clock())          # type: ignore[operator]
        if self.first_error is None and _ERROR.search(text):
            self.first_error = text.strip()[:400]
            return text
        h = _HITS.match(text)
        if h and "hit" in text:
            self.hits += int(h.group(1) or h.group(2) or 0)
        if self.files - self._said >= self.every:
            self._said = self.files
            return self.line()
        return None

    def total(self) -> int | None:
        """About how many files the build compiles, from make's percentage (None before)."""
        if self.percent <= 0 or self.files == 0:
            return None
        return max(self.files, round(self.files * 100 / self.percent))

    def line(self) -> str:
        elapsed = self.clock() - self.started          # type: ignore[operator]
        total = self.total()
        head = f"{self.what}: {self.files} files" + (f" of about {total} ({self.percent}%)" if total else "")
        left = ""
        if total and self.files:
            pace = elapsed / self.files
            if len(self._recent) >= 10 and self._recent[-1] > self._recent[0]:
                pace = (self._recent[-1] - self._recent[0]) / (len(self._recent) - 1)
            left = f", about {_minutes(pace * (total - self.files))} left"
        return f"{head}, {_minutes(elapsed)} elapsed{left}"

    def summary(self) -> str:
        return self.line() + f", ccache hits {self.hits}"


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {int(seconds % 60):02d} s" if seconds >= 60 else f"{int(seconds)} s"
