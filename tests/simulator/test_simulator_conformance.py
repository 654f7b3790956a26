"""The course simulator computes what numba's own simulator computes, kernel by kernel.

numba's simulator runs the cases of `conformance_kernels` once, in a subprocess
(it only works when NUMBA_ENABLE_CUDASIM=1 is set before numba is imported); the
course simulator runs them here, each kernel also compiled to PTX (conftest).
Warp shuffles and votes, which numba's simulator lacks, are checked against NumPy.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gpucourse  # noqa: F401 (first: it chooses the backend)
from gpucourse import simulated, trace

import conformance_kernels as ck

HERE = Path(__file__).resolve().parent
CASES = {case.name: case for case in ck.conformance_cases()}


@pytest.fixture(scope="module")
def numba_simulator_outputs(tmp_path_factory):
    """Outputs of every case on numba's simulator, and the cases it failed on."""
    path = tmp_path_factory.mktemp("numba-simulator") / "outputs.npz"
    tests = str(HERE.parent)  # kernels_elsewhere
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")]))}
    result = subprocess.run(
        [sys.executable, str(HERE / "run_on_numba_simulator.py"), str(path)],
        env=env, cwd=HERE, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, f"numba's simulator run failed:\n{result.stdout}\n{result.stderr}"
    with np.load(path) as data:
        outputs = {key: data[key] for key in data.files}
    errors = json.loads(str(outputs.pop("__errors__")))
    return outputs, errors


def on_course_simulator(run):
    """``run()`` with launches on the course simulator (also on a machine with a GPU)."""
    with simulated():
        return run()


@pytest.mark.parametrize("name", list(CASES))
def test_same_outputs_as_numba_simulator(name, numba_simulator_outputs):
    expected, errors = numba_simulator_outputs
    if name in errors:
        pytest.fail(f"numba's simulator failed on `{name}`:\n{errors[name]}")
    case = CASES[name]
    got = on_course_simulator(case.run)
    assert got.keys() == {key for key in expected if key.startswith(f"{name}:")}
    for key, value in got.items():
        reference = expected[key]
        assert (value.dtype, value.shape) == (reference.dtype, reference.shape), key
        if case.order_free:
            value, reference = np.sort(value, axis=None), np.sort(reference, axis=None)
        if case.rtol or case.atol:
            np.testing.assert_allclose(value, reference, rtol=case.rtol, atol=case.atol, err_msg=key)
        else:
            np.testing.assert_array_equal(value, reference, err_msg=key)


def test_cases_cover_partial_blocks():
    """Every case has a size that leaves some threads of the launch without data."""
    for case in CASES.values():
        args = case.inputs()
        grid, block = (np.atleast_1d(case.grid), np.atleast_1d(case.block))
        threads = int(np.prod(grid) * np.prod(block))
        elements = max(np.asarray(a).size for a in args if isinstance(a, np.ndarray))
        assert threads != elements, case.name


# -- warp shuffles and votes (numba's simulator has none): against NumPy ----------------------------
def _padded_warps(a: np.ndarray, lanes: int) -> np.ndarray:
    padded = np.zeros(lanes, a.dtype)
    padded[: a.size] = a
    return padded.reshape(-1, ck.WARP)


@pytest.mark.parametrize("threads", [96, 64])
def test_shfl_down_warp_sums(threads):
    a = ck._f32(np.random.default_rng(20), 300)
    grid = ck.blocks(a.size, threads)
    out = np.full(grid * threads // ck.WARP, np.nan, np.float32)
    on_course_simulator(lambda: ck.warp_sums_shfl_down[grid, threads](out, a))
    expected = _padded_warps(a, grid * threads).astype(np.float64).sum(axis=1)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_shfl_xor_butterfly_gives_every_lane_the_warp_sum():
    a = ck._f32(np.random.default_rng(21), 250)
    threads = 64
    grid = ck.blocks(a.size, threads)
    out = np.full(a.size, np.nan, np.float32)
    on_course_simulator(lambda: ck.warp_sums_shfl_xor[grid, threads](out, a))
    sums = _padded_warps(a, grid * threads).astype(np.float64).sum(axis=1)
    np.testing.assert_allclose(out, np.repeat(sums, ck.WARP)[: a.size], rtol=1e-5, atol=1e-5)


def test_ballot_sync_and_popc():
    a = ck._f32(np.random.default_rng(22), 200)
    threads = 96
    grid = ck.blocks(a.size, threads)
    warps = grid * threads // ck.WARP
    bits, counts = np.zeros(warps, np.uint32), np.full(warps, -1, np.int32)
    on_course_simulator(lambda: ck.positive_ballots[grid, threads](bits, counts, a))
    positive = _padded_warps(a > 0, grid * threads)
    expected = (positive.astype(np.uint64) << np.arange(ck.WARP, dtype=np.uint64)).sum(axis=1)
    np.testing.assert_array_equal(bits, expected.astype(np.uint32))
    np.testing.assert_array_equal(counts, positive.sum(axis=1))


# -- determinism ------------------------------------------------------------------------------------
def _float_atomics() -> dict:
    a = ck._f32(np.random.default_rng(23), 5000)
    total = np.zeros(1, np.float32)
    ck.atomic_total[ck.blocks(a.size, 128), 128](total, a)
    return {"atomic_total": total, **CASES["block_sum"].run(), **CASES["histogram_shared"].run()}


def test_same_launch_gives_bit_identical_outputs():
    """Float atomics in lane order, reductions in a fixed order: twice the same bits (and with tracing)."""
    first = on_course_simulator(_float_atomics)
    second = on_course_simulator(_float_atomics)
    with trace():
        traced = _float_atomics()
    for key, value in first.items():
        assert value.tobytes() == second[key].tobytes(), key
        assert value.tobytes() == traced[key].tobytes(), key
    a = ck._f32(np.random.default_rng(23), 5000)
    np.testing.assert_allclose(first["atomic_total"][0], a.astype(np.float64).sum(), rtol=1e-4)
