"""nbgrader for this repository: sources in solutions/, the student release in assignments/."""

import os

c = get_config()  # noqa: F821 (nbgrader provides it)

c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.course_id = "gpu-kernels"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "assignments"
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(c.CourseDirectory.root, "gradebook.db")
# Where students fetch and submit (`make exchange` creates it; students' `make lab` reads the same variable).
c.Exchange.root = os.environ.get("NBGRADER_EXCHANGE", "/srv/nbgrader/exchange")

# `nbgrader zip_collect`: who submitted which notebook, from the file names of an LMS's download (the pattern is
# matched against the whole path): Canvas `doejane_12345_67890_tensors.ipynb` (late: `doejane_LATE_12345_...`),
# Moodle `Jane Doe_12345_assignsubmission_file_tensors.ipynb`. Another LMS: pass your own on the command line,
# --FileNameCollectorPlugin.named_regexp='...' with the groups student_id and file_id.
c.FileNameCollectorPlugin.named_regexp = (r".*/(?P<student_id>[^/]+?)_(?:LATE_)?\d+_(?:\d+|assignsubmission_file)_"
                                          r"(?P<file_id>[^/]+\.ipynb)$")

# Kernels run on the CPU simulator when the grading machine has no GPU: give each
# cell time, and never let one slow or hanging submission stall the whole run.
c.ExecutePreprocessor.timeout = 300
c.ExecutePreprocessor.interrupt_on_timeout = True
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}

# Feedback shows each test cell as the student saw it: without the hidden tests
# (nbgrader 0.9 would otherwise print them in the feedback, jupyter/nbgrader#917); long lines wrap.
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor  # noqa: E402
from nbgrader.preprocessors import ClearHiddenTests, GetGrades  # noqa: E402

from gpucourse.classroom.autograde import FeedbackExporter, WrapLongLines  # noqa: E402

c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, CSSHTMLHeaderPreprocessor, WrapLongLines]
c.GenerateFeedback.exporter_class = FeedbackExporter  # its contents name each test by its grade_id

# Grading a class safely (`make grade`): each notebook runs in a sandboxed kernel under a time
# limit for the whole notebook, and a dead or hung kernel costs only the cells it did not reach;
# copied cells or unknown grade_ids, and stderr from a student's own code, do not zero a notebook
# or a test; outputs are capped and carry no hidden-test line into the feedback.
from nbconvert.preprocessors import ClearMetadataPreprocessor  # noqa: E402
from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, ClearOutput, DeduplicateIds,  # noqa: E402
                                    IgnorePattern, LimitOutput, OverwriteCells, OverwriteKernelspec,
                                    SaveAutoGrades)

from gpucourse.classroom.autograde import KeepKnownIds, SafeExecute, ScrubOutputs, StderrIsOutput  # noqa: E402

c.Autograde.sanitize_preprocessors = [ClearOutput, KeepKnownIds, DeduplicateIds, OverwriteKernelspec, OverwriteCells,
                                      CheckCellMetadata]
c.Autograde.autograde_preprocessors = [SafeExecute, IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
                                       StderrIsOutput, ScrubOutputs, SaveAutoGrades, AssignLatePenalties,
                                       CheckCellMetadata]
c.SafeExecute.notebook_timeout = 1200
