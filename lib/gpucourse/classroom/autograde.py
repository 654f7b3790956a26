"""nbgrader preprocessors that grade a class safely (``nbgrader_config.py`` puts them in the pipeline).

- `SafeExecute` runs the notebook in a sandboxed kernel (`sandbox`), with a time limit for the
  whole notebook; a cell past its time limit is interrupted and says so (an endless kernel costs
  its own test only); a kernel that dies or stops answering costs only the cells it did not reach,
  which get an error output saying why (nbgrader would drop the whole submission). A kernel that does
  not start has run no student code: `KernelDidNotStart`, and the submission fails to grade.
- `KeepKnownIds` (before nbgrader's own checks): a copied answer cell or a cell with an unknown
  ``grade_id`` becomes a plain cell instead of failing the notebook.
- `StderrIsOutput`: warnings or logging in a student's own code do not zero a test cell.
- `ScrubOutputs`: no output over a byte cap, and no line of a hidden test, reaches the feedback.
- `WrapLongLines` (feedback): a long line of code or of a message wraps instead of scrolling sideways.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path

from jupyter_client.kernelspec import KernelSpec
from nbconvert.exporters import HTMLExporter
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import run_sync
from nbformat import NotebookNode
from nbgrader.api import Gradebook
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Integer, Unicode

from . import sandbox
from .regions import lines_by_region

NOT_RUN = "NotRun"
TIMED_OUT = "CellTimeoutError"
HIDDEN_COURSES = "GPUCOURSE_HIDDEN_COURSES"  # more course folders the sandbox hides (os.pathsep between them)
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # colours in tracebacks, which split a quoted line


def error_output(ename: str, message: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=message, traceback=[f"{ename}: {message}"])


class KernelDidNotStart(RuntimeError):
    """The kernel failed before it answered: no student code ran, so the grading machine failed, not the student."""


def exchange_root(config) -> str:
    """The nbgrader exchange (every student's submission): ``config``'s, else the course's nbgrader_config.py's
    (NBGRADER_EXCHANGE, else /srv/nbgrader/exchange), also where a grader runs without that file (the clean room)."""
    return config.Exchange.get("root") or os.environ.get("NBGRADER_EXCHANGE", "/srv/nbgrader/exchange")


class SafeExecute(Execute):
    """nbgrader's Execute, in a sandboxed kernel, under a time limit for the notebook, never losing it."""

    notebook_timeout = Integer(1200, help="Seconds for the whole notebook; later cells are not run.").tag(config=True)
    memory_limit = Integer(8 << 30, help="Bytes of data the kernel may allocate.").tag(config=True)
    course_root = Unicode("", help="The course directory the sandbox hides (default: nbgrader's).").tag(config=True)
    probe_seconds = Integer(10, help="How long a kernel has to answer after a cell timed out.").tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        self._deadline = time.monotonic() + self.notebook_timeout
        self._stopped = None
        self._cell_timeout = self.timeout
        self._reached_cells = False
        with tempfile.TemporaryFile() as self._kernel_stderr, tempfile.TemporaryDirectory(prefix="kernel-") as folder:
            self._sockets = Path(folder)  # the sandboxed kernel's Unix sockets
            try:
                return super().preprocess(nb, resources, km)
            except Exception as exc:
                if not self._reached_cells:
                    raise KernelDidNotStart(f"no student code ran, the grading machine failed: {type(exc).__name__}: "
                                            f"{exc}{self._kernel_said()}") from exc
                self._stop_all(nb, f"the kernel failed: {type(exc).__name__}: {exc}")  # at shutdown: keep what ran
                return nb, resources

    def start_new_kernel(self, **kwargs):
        super().start_new_kernel(stderr=self._kernel_stderr, **kwargs)

    def _kernel_said(self) -> str:
        """The last lines the kernel's process wrote to stderr (why it did not start), as a clause."""
        self._kernel_stderr.seek(0)
        lines = [line.strip() for line in self._kernel_stderr.read().decode(errors="replace").splitlines()]
        said = " | ".join(line for line in lines if line)[-300:]
        return f"; the kernel's process said: {said}" if said else ""

    def create_kernel_manager(self):
        km = super().create_kernel_manager()
        if sandbox.unavailable() is None:
            root = Path(self.course_root or self.config.CourseDirectory.get("root", ".") or ".")
            workdir = Path(self.resources.get("metadata", {}).get("path") or ".")
            roots = [root, *filter(None, os.environ.get(HIDDEN_COURSES, "").split(os.pathsep))]
            sockets = None
            if sandbox.isolates_network():  # no network in the kernel: the grader reaches it by Unix sockets
                sockets = self._sockets
                km.transport, km.ip = "ipc", str(sockets / "kernel")
            argv = sandbox.kernel_argv(roots, workdir, self.memory_limit, sockets, hidden=(exchange_root(self.config),))
            km._kernel_spec = KernelSpec(argv=argv, display_name="gpucourse sandbox", language="python",
                                         interrupt_mode="message")  # bwrap passes no SIGINT on
        return km

    def preprocess_cell(self, cell, resources, index):
        self._reached_cells = True  # the kernel answered: what goes wrong from here on is the notebook's
        if cell.cell_type != "code":
            return cell, resources
        left = self._deadline - time.monotonic()
        if self._stopped is None and left <= 0:
            self._stopped = f"the notebook's time limit ({self.notebook_timeout} s) was reached"
        if self._stopped is not None:
            cell.outputs = [error_output(NOT_RUN, f"not run: {self._stopped}")]
            return cell, resources
        self.timeout = max(1, min(self._cell_timeout, int(left)))
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            why = "(os._exit, a signal, or out of memory)"
            return self._stop(cell, resources, "KernelDied", f"the kernel died in this cell {why}",
                              f"the kernel died in an earlier cell {why}")
        except CellTimeoutError:
            return self._stop(cell, resources, "CellTimeoutError", "no output from the kernel before the time limit",
                              "an earlier cell ran past its time limit")
        if any(o.get("ename") == "CellTimeoutError" for o in cell.outputs):
            cell.outputs = [o for o in cell.outputs if o.get("ename") not in ("CellTimeoutError", "KeyboardInterrupt")]
            cell.outputs.append(error_output(TIMED_OUT, f"stopped after {self.timeout} s: this cell did not finish "
                                             "in its time limit (a loop or a kernel that never ends?)"))
            if not self._answers():
                self._stopped = "a cell ran past its time limit and the kernel did not stop when interrupted"
        return cell, resources

    def _stop(self, cell, resources, ename: str, here: str, later: str):
        """This cell gets ``here`` as its error; the cells after it are not run, for the reason ``later``."""
        cell.outputs.append(error_output(ename, here))
        self._stopped = later
        return cell, resources

    def _answers(self) -> bool:
        """Whether the kernel answers a kernel_info request within `probe_seconds`."""
        msg_id = self.kc.kernel_info()
        deadline = time.monotonic() + self.probe_seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                reply = run_sync(self.kc.get_shell_msg)(timeout=left)
            except Exception:
                return False
            if reply.get("parent_header", {}).get("msg_id") == msg_id:
                return True
        return False

    def _stop_all(self, nb, why: str) -> None:
        for cell in nb.cells:
            if cell.cell_type == "code" and not cell.get("outputs") and cell.get("execution_count") is None:
                cell.outputs = [error_output(NOT_RUN, f"not run: {why}")]


def _known_ids(resources) -> set[str]:
    """The grade_ids of the source notebook, from the gradebook."""
    info = resources.get("nbgrader", {})
    with Gradebook(info["db_url"]) as gradebook:
        notebook = gradebook.find_notebook(info["notebook"], info["assignment"])
        cells = [*notebook.grade_cells, *notebook.solution_cells, *notebook.source_cells, *notebook.task_cells]
        return {c.name for c in cells}


class KeepKnownIds(NbGraderPreprocessor):
    """Cells whose ``grade_id`` the source does not have, or has given to an earlier cell, become plain cells.

    A student who copies an answer cell keeps the last copy they wrote in as the answer.
    """

    def preprocess(self, nb, resources):
        known = _known_ids(resources)
        by_id: dict[str, list] = {}
        for cell in nb.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if grade_id is not None:
                by_id.setdefault(grade_id, []).append(cell)
        for grade_id, cells in by_id.items():
            keep = [] if grade_id not in known else [_the_one_to_grade(cells)]
            for cell in cells:
                if cell not in keep:
                    del cell.metadata["nbgrader"]
                    self.log.warning("cell with grade_id %r is %s: graded as a plain cell", grade_id,
                                     "a copy" if keep else "not in the source")
        return nb, resources


def _the_one_to_grade(cells: list):
    """Among copies of one cell: the last that differs from the first (the one the student edited), else the first."""
    edited = [c for c in cells[1:] if c.source != cells[0].source]
    return edited[-1] if edited else cells[0]


def _is_test(cell) -> bool:
    meta = cell.metadata.get("nbgrader", {})
    return cell.cell_type == "code" and meta.get("grade") and not meta.get("solution")


class StderrIsOutput(NbGraderPreprocessor):
    """In test cells, text on stderr (a warning, logging) is shown as output instead of failing the test."""

    def preprocess_cell(self, cell, resources, index):
        if _is_test(cell):
            for output in cell.get("outputs", []):
                if output.output_type == "stream" and output.name == "stderr":
                    output.name = "stdout"
        return cell, resources


class ScrubOutputs(NbGraderPreprocessor):
    """Outputs capped at `max_bytes` each, and no line that shows a hidden test's line (tracebacks quote them)."""

    max_bytes = Integer(20_000, help="Bytes of text an output keeps; the rest is cut.").tag(config=True)

    def preprocess(self, nb, resources):
        course = self.config.CourseDirectory
        self._hidden = hidden_lines(Path(course.get("root", ".") or "."), course.get("source_directory", "source"),
                                    resources)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        for output in cell.get("outputs", []):
            if "text" in output:
                output.text = self._scrub(output.text)
            for mime, value in output.get("data", {}).items():
                if isinstance(value, str):
                    output.data[mime] = self._scrub(value)
            if "traceback" in output:
                output.traceback = [self._scrub(line) for line in output.traceback]
        return cell, resources

    def _scrub(self, text: str) -> str:
        lines = [("[a line of a hidden test]" if any(hidden in ANSI.sub("", line) for hidden in self._hidden) else line)
                 for line in text.split("\n")]
        text = "\n".join(lines)
        data = text.encode()
        if len(data) > self.max_bytes:
            text = data[: self.max_bytes].decode(errors="ignore") + f"\n[... {len(data) - self.max_bytes} bytes cut]"
        return text


class WrapLongLines(NbGraderPreprocessor):
    """The feedback's code and outputs wrap at the page's width (a grading message is one long line; the student
    should not scroll sideways to read it). After nbconvert's `CSSHTMLHeaderPreprocessor`, which it adds to."""

    css = "pre { white-space: pre-wrap; overflow-wrap: anywhere; }"

    def preprocess(self, nb, resources):
        resources.setdefault("inlining", {}).setdefault("css", []).append(self.css)
        return nb, resources


class FeedbackExporter(HTMLExporter):
    """nbgrader's feedback page, its contents naming each test by its grade_id (``test_row_max``: what the exercise
    checks) where nbgrader's template writes "Test cell" for every one."""

    def from_notebook_node(self, nb, resources=None, **kw):
        page, resources = super().from_notebook_node(nb, resources, **kw)
        return re.sub(r'<a href="#([\w-]+)">Test cell</a>', r'<a href="#\1"><code>\1</code></a>', page), resources


def hidden_lines(course_root: Path, source_folder: str, resources) -> set[str]:
    """Lines of the source notebook's hidden tests (stripped, at least 8 characters)."""
    info = resources.get("nbgrader", {})
    source = course_root / source_folder / info.get("assignment", "") / f"{info.get('notebook', '')}.ipynb"
    if not source.is_file():
        return set()
    return {line for line in lines_by_region(source)["hidden tests"] if len(line) >= 8}
