"""Whose failure a kernel's is: one that never started ran no student code (the grading machine failed); one
that died in a cell is the student's (the cells it did not reach score 0). And a sandboxed kernel has no network."""

import os
import socket
import sys

import pytest
from nbformat.v4 import new_code_cell, new_notebook

from gpucourse.classroom import sandbox
from gpucourse.classroom.autograde import KernelDidNotStart, SafeExecute

KERNELSPEC = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}


def notebook():
    return new_notebook(cells=[new_code_cell("x = 1"), new_code_cell("import os\nos._exit(1)"), new_code_cell("x")],
                        metadata=KERNELSPEC)


def test_a_kernel_that_does_not_start_fails_the_grading_with_what_its_process_said(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "unavailable", lambda: None)
    monkeypatch.setattr(sandbox, "kernel_argv", lambda *args, **kwargs: [sys.executable, "-c", "raise SystemExit('no python')"])
    with pytest.raises(KernelDidNotStart, match=r"^no student code ran, the grading machine failed: RuntimeError: "
                       r"Kernel died before replying to kernel_info; the kernel's process said: no python$"):
        SafeExecute(course_root=str(tmp_path)).preprocess(notebook(), {"metadata": {"path": str(tmp_path)}})


def test_a_kernel_that_dies_in_a_cell_costs_the_student_the_cells_it_did_not_reach(tmp_path):
    ran, _ = SafeExecute(course_root=str(tmp_path), timeout=60).preprocess(
        notebook(), {"metadata": {"path": str(tmp_path)}})
    first, died, later = ran.cells
    assert first.execution_count == 1 and not first.outputs
    assert [o.ename for o in died.outputs] == ["KernelDied"]
    assert [(o.ename, o.evalue) for o in later.outputs] == [
        ("NotRun", "not run: the kernel died in an earlier cell (os._exit, a signal, or out of memory)")]


def test_a_sandboxed_kernel_reaches_no_port_of_the_grading_machine_and_still_runs(tmp_path):
    if sandbox.unavailable() is not None or not sandbox.isolates_network():
        reason = f"no network namespace for a sandboxed kernel here: {sandbox.unavailable() or 'bwrap --unshare-net'}"
        if os.environ.get("GPUCOURSE_REQUIRE_SANDBOX") == "1":
            pytest.fail(f"GPUCOURSE_REQUIRE_SANDBOX=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    with socket.create_server(("127.0.0.1", 0)) as server:  # a port on this machine, open to its own processes
        port = server.getsockname()[1]
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        reach = (f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=5)\n"
                 "    print('reached the grader')\nexcept OSError as error:\n    print('no network:', type(error).__name__)")
        nb = new_notebook(cells=[new_code_cell(reach), new_code_cell("print(6 * 7)")], metadata=KERNELSPEC)
        ran, _ = SafeExecute(course_root=str(tmp_path), timeout=60).preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    assert [o.get("text") for c in ran.cells for o in c.outputs] == ["no network: ConnectionRefusedError\n", "42\n"]
