"""The regions of an nbgrader source notebook: solution code, hidden tests, and what students see."""

from __future__ import annotations

import json
from pathlib import Path

MARKERS = {"### BEGIN SOLUTION": ("solution", "### END SOLUTION"),
           "### BEGIN HIDDEN TESTS": ("hidden tests", "### END HIDDEN TESTS")}


def lines_by_region(notebook: Path) -> dict[str, set[str]]:
    """The stripped lines of a source notebook's cells: ``public`` (the markers too), ``solution``, ``hidden tests``."""
    regions: dict[str, set[str]] = {"public": set(), "solution": set(), "hidden tests": set()}
    for cell in json.loads(Path(notebook).read_text())["cells"]:
        region, end = "public", None
        for line in "".join(cell["source"]).splitlines():
            stripped = line.strip()
            opening = next((m for m in MARKERS if stripped.startswith(m)), None) if end is None else None
            if opening:
                region, end = MARKERS[opening]
                regions["public"].add(stripped)
            elif end is not None and stripped.startswith(end):
                region, end = "public", None
                regions["public"].add(stripped)
            elif stripped:
                regions[region].add(stripped)
    return regions
