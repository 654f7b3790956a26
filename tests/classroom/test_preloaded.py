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
if sys.argv[1] == "nap":
    time.sleep(2)
    sys.exit(0)
if sys.argv[1] == "raise":
    raise ValueError("a bug in the command")
if sys.argv[1] == "warm":  # what this fork finds built: nbformat's validators, nbgrader's gradebook version
    import nbformat.validator, nbgrader.api
    print(sorted(key[-1] for key in nbformat.validator.validators), nbgrader.api.get_alembic_version())
    sys.exit(0)
sys.exit(int(sys.argv[1]))
'''


def stop_preloaded() -> None:
    """End this process's preloaded process (closing its pipe, as the end of this process would)."""
    server = preloaded._Server._current
    if server is not None:
        server.process.stdin.close()
        server.process.wait(timeout=60)
        deadline = time.monotonic() + 10  # its reply thread marks it closed when it reads the pipe's end
        while not server.closed and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.closed, "the preloaded process ended but its reply thread did not see it"


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    """A folder to run in; the preloaded process, started again with a probe module on its import path."""
    folder = tmp_path_factory.mktemp("probe")
    (folder / "probe_module.py").write_text(PROBE)
    (folder / "here").mkdir()
    stop_preloaded()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")]))
        preloaded.run_module(folder, "probe_module", "0", timeout=120)  # starts it
        yield folder / "here"
        stop_preloaded()  # the next user starts one without the probe


def test_a_command_runs_in_its_folder_and_environment_with_its_output_and_status(probe):
    env = dict(preloaded.environment(), WISH="granted")
    server = preloaded._Server._current.process.pid
    first = preloaded.run_module(probe, "probe_module", "3", "x", timeout=60, env=env)
    second = preloaded.run_module(probe, "probe_module", "0", timeout=60, env=env)
    assert first.returncode == 3 and second.returncode == 0
    assert first.stdout == f"cwd {probe} wish granted args 3 x\n"
    assert first.stderr == "to stderr\n"
    assert preloaded._Server._current.process.pid == server, "the commands did not reuse the preloaded process"


def test_an_exception_is_status_1_with_its_traceback(probe):
    done = preloaded.run_module(probe, "probe_module", "raise", timeout=60)
    assert done.returncode == 1
    assert "ValueError: a bug in the command" in done.stderr


def test_commands_from_several_threads_run_side_by_side(probe):
    started = time.monotonic()
    with ThreadPoolExecutor(3) as threads:
        done = list(threads.map(lambda _: preloaded.run_module(probe, "probe_module", "nap", timeout=60), range(3)))
    assert [d.returncode for d in done] == [0, 0, 0]
    assert time.monotonic() - started < 5.5, "three 2-second commands ran one after another"


def test_a_command_past_its_time_limit_is_killed_and_says_so(probe):
    started = time.monotonic()
    done = preloaded.run_module(probe, "probe_module", "sleep", timeout=1)
    assert time.monotonic() - started < 30  # not the 60 s it sleeps
    assert done.returncode == -9 and done.stderr.endswith("timed out after 1 s")
    assert done.stdout.startswith("cwd")  # what it wrote before is kept


def test_a_dead_preloaded_process_is_started_again(probe):
    preloaded._Server._current.process.kill()
    assert preloaded.run_module(probe, "probe_module", "5", timeout=60).returncode == 5



def test_a_command_finds_the_schema_validators_and_the_gradebook_version_built(probe):
    """Built once in the preloaded process, not in each fork (about half a second each)."""
    done = preloaded.run_module(probe, "probe_module", "warm", timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"[False, True] {preloaded.alembic_head()}"


def test_the_gradebook_version_is_what_alembic_heads_says(monkeypatch):
    """Forked commands take a new gradebook's version from `alembic_head`, not from a new process."""
    from nbgrader.api import get_alembic_version  # nbgrader's own: runs `alembic heads`

    monkeypatch.setenv("PATH", preloaded.environment()["PATH"])
    assert preloaded.alembic_head() == get_alembic_version()
