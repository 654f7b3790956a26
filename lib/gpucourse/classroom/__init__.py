"""The instructor's pipeline: grade a class of nbgrader submissions on a Dask cluster (``make grade``).

Holds: `grade` (the driver: one task per submission, the gradebook, ``grades.csv``, the summary),
`submission` (the task a worker runs), `preloaded` (its nbgrader and clean-room
commands, forked from a process that has imported them once), `autograde` (nbgrader preprocessors that grade safely),
`sandbox` (bubblewrap around each student's kernel), `clean_room` (the tests again on the student's
definitions alone), `regions` (solution and hidden-test lines of a source notebook), `trial` (a class of
solutions and untouched releases, to check the pipeline).
May import: nothing of gpucourse (the notebooks it grades import the rest).
"""

__all__ = ["grade", "sandbox", "submission", "trial"]  # modules, imported on first use (`from . import trial`)
