"""The first code cell of every notebook, rendered from one configured source.

pyproject.toml's ``[tool.gpucourse]`` says where Colab installs the course
package from. ``python -m gpucourse.course.setup_cell lectures solutions``, run in the repository
root, rewrites
the first code cell of every notebook below those folders; a test checks
they all match.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import nbformat

MARKER = "# Setup: picks the GPU or the CPU simulator"

TEMPLATE = f'''{MARKER} (on Colab, installs the course first).
try:
    import gpucourse
except ModuleNotFoundError:
    %pip install --quiet "gpucourse[{{extra}}] @ {{source}}"
    import gpucourse
gpucourse.show_device()'''


def render(pyproject: Path) -> str:
    """The setup cell's source for the repository whose pyproject.toml is given."""
    config = tomllib.loads(pyproject.read_text())["tool"]["gpucourse"]
    return TEMPLATE.format(source=config["install-source"], extra=config["colab-extra"])


def first_code_cell(notebook):
    return next((c for c in notebook.cells if c.cell_type == "code"), None)


def rewrite(path: Path, source: str) -> bool:
    """Make the notebook's first code cell the setup cell; True when the file changed."""
    notebook = nbformat.read(path, as_version=4)
    cell = first_code_cell(notebook)
    if cell is not None and cell.source == source:
        return False
    if cell is not None and cell.source.startswith(MARKER):
        cell.source = source
    else:
        notebook.cells.insert(0, nbformat.v4.new_code_cell(source))
    nbformat.write(notebook, path)
    return True


def main(folders: list[str]) -> None:
    source = render(Path("pyproject.toml"))
    for folder in folders:
        for path in sorted(Path(folder).rglob("*.ipynb")):
            if ".ipynb_checkpoints" not in path.parts and rewrite(path, source):
                print(f"updated {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
