"""Helpers shared by the benchmark scripts: versions, dates and Markdown tables.

The scripts import it as ``common`` (each puts its own folder on ``sys.path``).
"""

from __future__ import annotations

import datetime
import platform
from importlib import metadata


def package_versions(*packages: str) -> str:
    """``"Python 3.11.7, numba 0.68.1, ..."``: installed versions (distribution names), or 'not installed'."""
    installed = []
    for package in packages:
        try:
            installed.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            installed.append(f"{package} (not installed)")
    return ", ".join([f"Python {platform.python_version()}", *installed])


def today() -> str:
    return datetime.date.today().isoformat()


def markdown_table(header: list[str], rows: list[list[str]], right: set[int] = frozenset()) -> str:
    """A Markdown table; the columns whose numbers are in ``right`` are right-aligned (numbers)."""
    if any(len(row) != len(header) for row in rows):
        raise ValueError(f"every row needs {len(header)} cells, one per column of {header}")
    rule = "|" + "|".join("---:" if k in right else "---" for k in range(len(header))) + "|"
    lines = ["| " + " | ".join(cells) + " |" for cells in [header, *rows]]
    return "\n".join([lines[0], rule, *lines[1:]])
