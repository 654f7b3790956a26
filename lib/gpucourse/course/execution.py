"""Run a notebook top to bottom in a fresh kernel, cell by cell, each cell within a time limit.

What the tests, `make soak` and `make gpu-check` use: a cell that runs past its limit is reported as a
`CellStalled` naming the cell's index and its first line, not as a whole run that ran out of time.
"""

from __future__ import annotations

from pathlib import Path

CELL_TIMEOUT = 300  # seconds: nbgrader's per-cell limit for the simulator


class CellStalled(RuntimeError):
    """A cell ran past its time limit."""

    def __init__(self, index: int, source: str, seconds: float):
        self.index, self.seconds = index, seconds
        self.first_line = next((line for line in source.splitlines() if line.strip()), "")
        super().__init__(f"cell {index} (`{self.first_line}`) ran past {seconds:.0f} s")


def run_notebook(notebook, cwd: Path, cell_timeout: float = CELL_TIMEOUT) -> None:
    """Execute ``notebook`` (an nbformat node, changed in place) in a fresh python3 kernel in ``cwd``.

    Raises `CellStalled` for a cell past ``cell_timeout`` seconds, nbclient's ``CellExecutionError`` for a
    cell that fails, and ``DeadKernelError`` for a kernel that died.
    """
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError

    client = NotebookClient(notebook, timeout=cell_timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(cwd)}})
    with client.setup_kernel():
        for index, cell in enumerate(notebook.cells):
            try:
                client.execute_cell(cell, index)
            except CellTimeoutError:
                raise CellStalled(index, cell.source, cell_timeout) from None
