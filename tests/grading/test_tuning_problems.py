"""The tuning problems of the SGEMM, the conv and the softmax: constraints, correctness filter, tuned on the CPU."""

import pytest

from gpucourse.figures import tuning as ft
from gpucourse.grading import tuning as gt
from gpucourse.run import resources_problem
from gpucourse.run import tuning as rt

needs_nvjitlink = pytest.mark.skipif(resources_problem() is not None, reason="nvJitLink is not installed")


@pytest.mark.parametrize("config, why", [
    ({"BM": 64, "BN": 64, "TM": 8, "TN": 8, "BK": 8}, "threads"),  # 64 threads: fine, but see the next
    ({"BM": 32, "BN": 32, "TM": 8, "TN": 8, "BK": 8}, "32 to 1024"),  # 16 threads
    ({"BM": 32, "BN": 128, "TM": 2, "TN": 2, "BK": 8}, "share out"),  # 1024 threads, a 32 x 8 tile of A
    ({"BM": 128, "BN": 128, "TM": 2, "TN": 4, "BK": 16}, "1024"),  # 2048 threads
])
def test_sgemm_constraint_names_the_broken_rule(config, why):
    reason = gt.sgemm_constraint(config)
    if why == "threads":
        assert reason is None
    else:
        assert reason is not None and why in reason


def test_the_sgemm_space_keeps_only_runnable_configs():
    space = gt.sgemm_problem(8, 8, 8).space
    assert space.valid() and all(gt.sgemm_constraint(c) is None for c in space.valid())
    assert {"BM": 64, "BN": 64, "TM": 4, "TN": 4, "BK": 16} in space.valid()


@needs_nvjitlink
def test_sgemm_tuned_by_the_cost_model_on_uneven_sizes():
    problem = gt.sgemm_problem(37, 45, 29, {"BM": (32,), "BN": (32, 64), "TM": (4,), "TN": (4,), "BK": (8,)})
    unlaunched = problem.build({"BM": 32, "BN": 32, "TM": 4, "TN": 4, "BK": 8})
    assert "unwritten" in problem.wrong()  # the poisoned output shows a launch that did not happen
    result = rt.tune(problem, model=ft.cost_model("H100"), measure=False)
    assert all("seconds" in t for t in result.trials) and result.best in problem.space.valid()
    unlaunched()
    assert problem.wrong() is None


@needs_nvjitlink
def test_softmax_and_conv_problems_are_correct_for_every_candidate():
    softmax = gt.softmax_problem(3, 70, threads=(32, 64))
    conv = gt.conv_problem(2, 3, 6, 5, 4, stride=1, padding=1)
    for problem in (softmax, conv):
        result = rt.tune(problem, model=ft.cost_model("T4"), measure=False)
        assert all("seconds" in t for t in result.trials), result.trials
        assert len(result.trials) == len(problem.space.valid())
    assert gt.softmax_problem(1, 5000).space.rejected()[0][0]["kernel"] == "row_fused"


@needs_nvjitlink
def test_a_large_problem_is_priced_from_its_traced_proxy_scaled_by_flops():
    config = {"BM": 32, "BN": 32, "TM": 4, "TN": 4, "BK": 8}
    space = {k: (v,) for k, v in config.items()}
    big = gt.sgemm_problem(512, 512, 256, space, traced=(40, 33, 16))
    small = big.proxy
    assert small.shapes == {"M": 40, "N": 33, "K": 16} and big.flops / small.flops == pytest.approx(512 * 512 * 256 / (40 * 33 * 16))
    model = ft.cost_model("H100")
    seconds = rt.price(big, config, model)  # traces only the 40 x 33 x 16 launch, checked against its reference
    assert seconds > rt.price(small, config, model)
    assert big.wrong() == "nothing launched to check: launch build(config) first"  # nor even built (`geometry`)
