"""Course tooling: recorded benchmark results, library source shown in lectures, 'your turn' checks, slides,
the setup cell, the student edition.

Holds: `results`, `source`, `prediction`, `execution` (a notebook run cell by cell within a time limit),
`slide_layout` (cells laid out to fit a slide), `inline_figures` (a notebook's figures drawn once less),
`wheel` (the course package as a wheel, offline), and three commands, `python -m gpucourse.course.slides`,
`python -m gpucourse.course.setup_cell` and `python -m gpucourse.course.student_edition`. May import:
nothing of gpucourse.
"""

from . import execution, prediction, results, source
from .execution import CellStalled, run_notebook
from .prediction import check_prediction, try_puzzle
from .results import record, recorded, recorded_rows, show_recorded
from .source import show_source, source_of

__all__ = ["results", "source", "prediction", "execution", "CellStalled", "run_notebook", "record", "recorded",
           "recorded_rows", "show_recorded", "show_source", "source_of", "check_prediction", "try_puzzle"]
