"""The holdout kernels of ``benchmarks/simulator_speed.py`` compute their NumPy references on the course
simulator (each kernel is also compiled to PTX: conftest)."""

import pytest

import gpucourse  # noqa: F401 (first: it chooses the backend)
from gpucourse import simulated

import holdout_kernels as hk


@pytest.mark.parametrize("case", hk.holdout_cases(), ids=lambda case: case.name)
def test_holdout_kernel_matches_reference(case):
    args = case.inputs()
    with simulated():
        case.launch(args)
    hk.check_outputs(case, args)
