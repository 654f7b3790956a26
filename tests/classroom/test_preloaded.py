"""Commands forked from a preloaded process behave as ``python -m`` would: folder, environment, output, status."""

import os
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from gpucourse.classroom import preloaded

PROBE = '''import os, sys, time
print("cwd", os.getcwd(), "wish", os.environ.get("WISH"), "args", *sys.argv[1:])
print("to stderr", file=sys.stderr)
if sys.argv[1] == "sleep":
    time.sleep(60)
if sys.argv[1] == "raise":
    raise ValueError("a bug in the command")
sys.exit(int(sys.argv[1]))
'''


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    """A folder to run in, and a thread whose preloaded process has a probe module on its import path."""
    folder = tmp_path_factory.mktemp("probe")
    (folder / "probe_module.py").write_text(PROBE)
    (folder / "here").mkdir()
    with pytest.MonkeyPatch.context() as patch, ThreadPoolExecutor(1) as thread:
        patch.setenv("PYTHONPATH", os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")]))
        thread.submit(preloaded.run_module, folder, "probe_module", "0", timeout=120).result()  # starts it
        yield folder / "here", lambda function: thread.submit(function).result()


def test_a_command_runs_in_its_folder_and_environment_with_its_output_and_status(probe):
    here, in_thread = probe
    env = dict(preloaded.environment(), WISH="granted")

    def two_commands():
        first = preloaded.run_module(here, "probe_module", "3", "x", timeout=60, env=env)
        server = preloaded._local.server.pid
        second = preloaded.run_module(here, "probe_module", "0", timeout=60, env=env)
        return first, second, server == preloaded._local.server.pid

    first, second, same_process = in_thread(two_commands)
    assert first.returncode == 3 and second.returncode == 0
    assert first.stdout == f"cwd {here} wish granted args 3 x\n"
    assert first.stderr == "to stderr\n"
    assert same_process, "the second command did not reuse the thread's preloaded process"


def test_an_exception_is_status_1_with_its_traceback(probe):
    here, in_thread = probe
    done = in_thread(lambda: preloaded.run_module(here, "probe_module", "raise", timeout=60))
    assert done.returncode == 1
    assert "ValueError: a bug in the command" in done.stderr


def test_a_command_past_its_time_limit_is_killed_and_says_so(probe):
    here, in_thread = probe
    started = time.monotonic()
    done = in_thread(lambda: preloaded.run_module(here, "probe_module", "sleep", timeout=1))
    assert time.monotonic() - started < 30  # not the 60 s it sleeps
    assert done.returncode == -9 and done.stderr.endswith("timed out after 1 s")
    assert done.stdout.startswith("cwd")  # what it wrote before is kept


def test_a_dead_preloaded_process_is_started_again(probe):
    here, in_thread = probe

    def kill_then_run():
        preloaded._local.server.kill()
        preloaded._local.server.wait()
        return preloaded.run_module(here, "probe_module", "5", timeout=60)

    assert in_thread(kill_then_run).returncode == 5
