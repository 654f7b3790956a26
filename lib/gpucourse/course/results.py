"""Benchmark results recorded in ``benchmarks/RESULTS.md``, for lectures to show without a GPU.

Each benchmark script owns one section of the file, between the markers
``<!-- NAME: begin -->`` and ``<!-- NAME: end -->``, and rewrites only that. Scripts that run side by side
(gpu-check's differential test and fuzzing) each rewrite theirs under a lock, so neither loses the other's.

Lectures show a section with `show_recorded`: its device and date, its goal lines and one table, or the rows and
columns of it that the lecture talks about, sized for a slide; the whole section stays in the file.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
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


# -- one table of a section ------------------------------------------------------------------------------------------
# A section holds Markdown tables (lines that start with "|", the second a separator such as |---|---:|), each under
# the nearest heading above it ("### Every measurement"), or under none. Lectures show one table, or part of one.


def cells(line: str) -> list[str]:
    """The cells of a Markdown table row, stripped (a backslash-escaped ``\\|`` stays inside its cell)."""
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def tables(text: str) -> list[tuple[str | None, list[str]]]:
    """The Markdown tables of a section, in order: (the heading above it, without its #'s, or None; its lines)."""
    found, heading, current, fenced = [], None, [], False
    for line in text.splitlines() + [""]:
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if line.startswith("|") and not fenced:
            current.append(line)
            continue
        if len(current) >= 2 and all(re.fullmatch(r":?-+:?", cell) for cell in cells(current[1])):
            found.append((heading, current))
        current = []
        if re.match(r"#{1,6}\s", line) and not fenced:
            heading = line.lstrip("#").strip()
    return found


class NoRows(LookupError):
    """No row of the chosen table has a first cell with one of the words asked for."""


def _words(words) -> tuple[str, ...]:
    return (words,) if isinstance(words, str) else tuple(words)


def _named(heading: str | None) -> str:
    return f'"{heading}"' if heading else "the table"


def _plain(text: str) -> str:
    return text.replace("`", "").strip()


def _columns_named(header: list[str], name: str) -> list[int]:
    """The columns ``name`` picks: the one headed exactly ``name``, else every one whose header begins with it as
    whole words (backticks ignored): "reference" picks "reference", not "reference ms"; "GB/s" picks
    "GB/s (read + write)"."""
    plain = [_plain(h) for h in header]
    exact = [k for k, h in enumerate(plain) if h == _plain(name)]
    return exact or [k for k, h in enumerate(plain) if re.match(re.escape(_plain(name)) + r"(?!\w)", h)]


@dataclass(frozen=True)
class Selection:
    """Part of one table of a section: its ``lines`` (header, separator, rows), the table's ``heading`` (or None),
    and how much of it is kept: ``rows`` of ``all_rows``, ``columns`` of ``all_columns``."""

    lines: list[str]
    heading: str | None
    rows: int
    all_rows: int
    columns: int
    all_columns: int

    @property
    def markdown(self) -> str:
        return "\n".join(self.lines)

    def describe(self) -> str:
        """What is kept, in words: '"Every measurement", 5 of 20 rows, 4 of 6 columns'."""
        parts = [_named(self.heading)]
        if self.rows < self.all_rows:
            parts.append(f"{self.rows} of {self.all_rows} rows")
        if self.columns < self.all_columns:
            parts.append(f"{self.columns} of {self.all_columns} columns")
        return ", ".join(parts)


def select_table(text: str, table: str | None = None, rows=None, columns=None) -> Selection:
    """One table of section ``text``, or part of it; raises LookupError (saying what there is) when the section has
    no such table, column or row (`NoRows`).

    ``table``: the first table under the heading that begins with this text ("Every measurement", or with its
    #'s, "### Every measurement"); None: the section's first table. ``rows``: words; only the rows whose first cell
    contains one of them (the header is kept). ``columns``: names; only the columns whose header begins with one of
    them as whole words, backticks ignored ("time (ms)", "matmul_naive", "cuDNN, benchmark off"), in the table's
    order (a header equal to a name is the only column that name picks). The same choice serves `recorded_rows`
    and `show_recorded`.
    """
    found = tables(text)
    if not found:
        raise LookupError("it has no table")
    if table is None:
        heading, lines = found[0]
    else:
        wanted = table.lstrip("#").strip()
        matching = [(h, t) for h, t in found if h is not None and h.startswith(wanted)]
        if not matching:
            headings = ", ".join(f'"{h}"' for h, _ in found if h) or "none"
            raise LookupError(f'it has no table under a heading "{wanted}" (its tables\' headings: {headings})')
        heading, lines = matching[0]
    header, separator, body = cells(lines[0]), cells(lines[1]), lines[2:]
    kept_rows = body
    if rows is not None:
        kept_rows = [line for line in body if any(word in cells(line)[0] for word in _words(rows))]
        if not kept_rows:
            raise NoRows(f"no row of {_named(heading)} has a first cell that contains "
                         + " or ".join(map(repr, _words(rows))))
    keep = list(range(len(header)))
    if columns is not None:
        names = _words(columns)
        missing = [name for name in names if not _columns_named(header, name)]
        if missing:
            raise LookupError(f"no column of {_named(heading)} is headed {' or '.join(map(repr, missing))} "
                              f"(its columns: {'; '.join(header)})")
        keep = sorted({k for name in names for k in _columns_named(header, name)})

    def row(line_cells: list[str]) -> str:
        return "| " + " | ".join(line_cells[k] if k < len(line_cells) else "" for k in keep) + " |"

    cut = [row(header), "|" + "|".join(separator[k] for k in keep) + "|"]
    cut += [row(cells(line)) for line in kept_rows]
    return Selection(cut, heading, len(kept_rows), len(body), len(keep), len(header))


def recorded_rows(name: str, words, path: Path = RESULTS, *, table: str | None = None, columns=None) -> str | None:
    """One table of section ``name`` cut to its header and the rows whose first cell contains one of ``words``
    (Markdown), or None when the section or such a row is missing.

    ``table`` and ``columns`` choose the table and its columns as in `select_table` (default: the section's first
    table, every column); a heading or a column that is not there raises LookupError.
    """
    text = recorded(name, path)
    if text is None:
        return None
    try:
        return select_table(text, table, rows=words, columns=columns).markdown
    except NoRows:
        return None


def measured_on(text: str) -> str | None:
    """Where and when a recorded section was measured, "on DEVICE, DATE", or None.

    From its "`python ...` on DEVICE" and "- Date:" lines, or from a first line "DEVICE, YYYY-MM-DD; ..." (the form
    `benchmarks/tuning.py` writes).
    """
    device = re.search(r"^`[^`]+` on (.+?)(?: \(|\.?$)", text, re.M)
    date = re.search(r"^- Date: (\S+)", text, re.M)
    if device and date:
        return f"on {device.group(1)}, {date.group(1)}"
    first = re.match(r"([^,;\n`|#][^,;\n]*), (\d{4}-\d{2}-\d{2})(?:[;.]|$)", text.strip(), re.M)
    return f"on {first.group(1)}, {first.group(2)}" if first else None


def goal_lines(text: str, goals=True) -> list[str]:
    """The lines of section ``text`` that state a goal ("- Goal: ...", "- Goals were set for ...", or "Goal: ..."),
    as list items: all of them (``goals=True``), none (False), or those that contain one of the words ``goals``."""
    if goals is False or goals is None:
        return []
    lines = [line.strip() for line in text.splitlines() if re.match(r"(- )?Goals?\b", line.strip())]
    if goals is not True:
        lines = [line for line in lines if any(word in line for word in _words(goals))]
    return [line if line.startswith("- ") else f"- {line}" for line in lines]


def show_recorded(name: str, path: Path = RESULTS, otherwise=None, *, table: str | None = None, rows=None,
                  columns=None, goals=True, whole: bool = False):
    """Display section ``name`` of `benchmarks/RESULTS.md` in a notebook, sized for a 1280 x 720 slide.

    Shows a note, "*Measured on DEVICE, DATE. Below: ...; the whole section: `benchmarks/RESULTS.md`, section
    `NAME`.*", the section's goal lines, and ONE table:

    - ``table``: the first table under the heading that begins with this text (``"Every measurement"``, or
      ``"### TFLOP/s and % of cuBLAS"``); by default the section's first table;
    - ``rows``: words; only the rows whose first cell contains one of them (``rows=("copy", "map")``);
    - ``columns``: names; only the columns headed so, or whose header begins with one of them as whole words,
      backticks ignored (``columns=("kernel", "time (ms)", "TFLOP/s")``): a table wider than a slide must be cut so;
    - ``goals``: True (every goal line), False (none), or words (the goal lines that contain one of them).

    ``whole=True`` shows the whole section instead, under its device-and-date line (a notebook, not a slide), as
    does a section with no table.
    A choice that matches nothing warns (on stderr, which the lecture tests catch) and shows the note alone.

    When the section was never recorded, ``otherwise`` (called if callable, e.g. a prediction from
    `gpucourse.figures.show_prediction`) is shown instead, else a note saying how to record it.
    """
    from IPython.display import Markdown

    if whole and (table, rows, columns) != (None, None, None):
        raise TypeError("show_recorded: whole=True shows the whole section; table, rows and columns choose a part")
    text = recorded(name, path)
    if text is None and otherwise is not None:
        return otherwise() if callable(otherwise) else otherwise
    if not path.exists():  # an installed package (Colab) has no benchmarks folder
        return Markdown(f"*The recorded `{name}` results are in `benchmarks/RESULTS.md` of the course repository.*")
    if text is None:
        return Markdown(f"*No `{name}` results recorded yet: run `python benchmarks/{name}.py` on a GPU.*")
    where = measured_on(text)
    if whole or (table, rows, columns) == (None, None, None) and not tables(text):  # nothing to cut
        return Markdown(f"*Measured {where} (`benchmarks/RESULTS.md`).*\n\n{text}" if where else text)
    whole_section = f"the whole section: `benchmarks/RESULTS.md`, section `{name}`"
    opening = f"Measured {where}." if where else "Recorded."
    try:
        selection = select_table(text, table, rows, columns)
    except LookupError as missing:
        warnings.warn(f"show_recorded({name!r}): section `{name}` of {path}: {missing}", stacklevel=2)
        return Markdown(f"*{opening} The table asked for is not there: {missing}; {whole_section}.*")
    parts = [f"*{opening} Below: {selection.describe()}; {whole_section}.*"]
    goal = goal_lines(text, goals)
    if goal:
        parts.append("\n".join(goal))
    parts.append(selection.markdown)
    return Markdown("\n\n".join(parts))
