"""`inline_figures`: in a kernel that imported the course, a figure left open at the end of a cell is shown once
and drawn twice (the inline PNG and its tight bounding box), not three times; `plt.show()` still shows."""

from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

COUNT_DRAWS = """import matplotlib.pyplot as plt
from matplotlib.figure import Figure
draws, _draw = [], Figure.draw
Figure.draw = lambda figure, *args, **kwargs: draws.append(figure) or _draw(figure, *args, **kwargs)"""


def draws_and_images(first_cell: str) -> tuple[list[int], list[int]]:
    """Figure draws and PNG outputs of a cell that leaves a figure open and a cell that calls `plt.show()`."""
    cells = [new_code_cell(first_cell), new_code_cell(COUNT_DRAWS),
             new_code_cell("fig, ax = plt.subplots()\nax.plot([1, 3, 2]);"), new_code_cell("print(len(draws))"),
             new_code_cell("plt.plot([2, 1])\nplt.show()"), new_code_cell("print(len(draws))")]
    notebook = new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                                  "language": "python"}})
    NotebookClient(notebook, timeout=120).execute()
    counts = [int(notebook.cells[i].outputs[0]["text"]) for i in (3, 5)]
    images = [sum("image/png" in o.get("data", {}) for o in notebook.cells[i].outputs) for i in (2, 4)]
    return [counts[0], counts[1] - counts[0]], images


def test_a_figure_is_shown_once_and_drawn_twice_after_import_gpucourse():
    assert draws_and_images("import gpucourse") == ([2, 2], [1, 1])


def test_without_the_course_pyplot_draws_it_once_more():
    assert draws_and_images("import numpy") == ([3, 2], [1, 1])
