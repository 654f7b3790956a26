"""nbgrader for this repository: sources in solutions/, the student release in assignments/."""

import os

c = get_config()  # noqa: F821 (nbgrader provides it)

c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.course_id = "gpu-kernels"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "assignments"
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(c.CourseDirectory.root, "gradebook.db")

# Kernels run on the CPU simulator when the grading machine has no GPU: give each
# cell time, and never let one slow or hanging submission stall the whole run.
c.ExecutePreprocessor.timeout = 300
c.ExecutePreprocessor.interrupt_on_timeout = True
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
