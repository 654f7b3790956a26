"""nbgrader for students (`make lab`): the course's exchange, where the Assignment List fetches and submits."""

import os

c = get_config()  # noqa: F821 (nbgrader provides it)

c.CourseDirectory.course_id = "gpu-kernels"
c.Exchange.root = os.environ.get("NBGRADER_EXCHANGE", "/srv/nbgrader/exchange")
