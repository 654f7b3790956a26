"""Course tooling: recorded benchmark results, library source shown in lectures, 'your turn' checks, slides,
the setup cell, the student edition.

Holds: `results`, `source`, `prediction`, `slide_layout` (cells laid out to fit a slide), `wheel` (the course
package as a wheel, offline), and three commands, `python -m gpucourse.course.slides`,
`python -m gpucourse.course.setup_cell` and `python -m gpucourse.course.student_edition`. May import:
nothing of gpucourse.
"""

from . import prediction, results, source
from .prediction import check_prediction
from .results import record, recorded, show_recorded
from .source import show_source, source_of

__all__ = ["results", "source", "prediction", "record", "recorded", "show_recorded", "show_source", "source_of",
           "check_prediction"]
