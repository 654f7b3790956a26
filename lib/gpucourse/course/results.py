"""Benchmark results recorded in ``benchmarks/RESULTS.md``, for lectures to show without a GPU.

Each benchmark script owns one section of the file, between the markers
``<!-- NAME: begin -->`` and ``<!-- NAME: end -->``, and rewrites only that. Scripts that run side by side
(gpu-check's differential test and fuzzing) each rewrite theirs under a lock, so neither loses the other's.
"""

from __future__ import annotations

import re
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: nothing runs gpu-check's parts side by side there
    fcntl = None

RESULTS = Path(__file__).resolve().parents[3] / "benchmarks" / "RESULTS.md"


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}: begin -->", f"<!-- {name}: end -->"


def recorded(name: str, path: Path = RESULTS) -> str | None:
    """The recorded section ``name`` (Markdown), or None when it was never recorded."""
    if not path.exists():
        return None
    begin, end = markers(name)
    match = re.search(re.escape(begin) + r"\n(.*?)\n" + re.escape(end), path.read_text(), re.S)
    return match.group(1).strip() if match else None


def record(name: str, text: str, path: Path = RESULTS) -> None:
    """Replace (or append) section ``name`` of the results file with ``text``."""
    begin, end = markers(name)
    block = f"{begin}\n{text.strip()}\n{end}"
    pattern = re.escape(begin) + r".*?" + re.escape(end)
    with open(path, "a") as held:  # one read-modify-write at a time: the lock is released when it closes
        if fcntl is not None:
            fcntl.flock(held, fcntl.LOCK_EX)
        current = path.read_text() or "# Benchmark results\n"
        if re.search(pattern, current, re.S):
            updated = re.sub(pattern, lambda _: block, current, flags=re.S)
        else:
            updated = current.rstrip("\n") + "\n\n" + block + "\n"
        path.write_text(updated)


def recorded_rows(name: str, words: tuple, path: Path = RESULTS) -> str | None:
    """The table of section ``name`` cut to its header and the rows whose first cell contains one of ``words``
    (Markdown), or None when the section or such a row is missing."""
    text = recorded(name, path)
    table = [line for line in (text or "").splitlines() if line.startswith("|")]
    rows = [line for line in table[2:] if any(word in line.split("|")[1] for word in words)]
    return "\n".join(table[:2] + rows) if rows else None


def measured_on(text: str) -> str | None:
    """Where and when a recorded section was measured, "on DEVICE, DATE" (from its "`python ...` on DEVICE" and "- Date:" lines), or None."""
    device = re.search(r"^`[^`]+` on (.+?)(?: \(|\.?$)", text, re.M)
    date = re.search(r"^- Date: (\S+)", text, re.M)
    return f"on {device.group(1)}, {date.group(1)}" if device and date else None


def show_recorded(name: str, path: Path = RESULTS, otherwise=None):
    """Display section ``name`` in a notebook, saying on which device and date it was measured.

    When it was never recorded, ``otherwise`` (called if callable, e.g. a prediction from
    `gpucourse.figures.show_prediction`) is shown instead, else a note saying how to record it.
    """
    from IPython.display import Markdown

    text = recorded(name, path)
    if text is None and otherwise is not None:
        return otherwise() if callable(otherwise) else otherwise
    if not path.exists():  # an installed package (Colab) has no benchmarks folder
        return Markdown(f"*The recorded `{name}` results are in `benchmarks/RESULTS.md` of the course repository.*")
    if text is None:
        return Markdown(f"*No `{name}` results recorded yet: run `python benchmarks/{name}.py` on a GPU.*")
    where = measured_on(text)
    return Markdown(f"*Measured {where} (`benchmarks/RESULTS.md`).*\n\n{text}" if where else text)
