"""The checks' import paths before the wings still work for one release, warning only outside nbgrader."""

import importlib
import warnings

import pytest

import gpucourse.grading as grading

OLD_NAMES = {
    "gpucourse.checks": ["check_kernel", "one_block", "blocks_1d", "one_block_2d", "blocks_2d", "outer", "case",
                         "CheckFailed"],
    "gpucourse.tensor_checks": ["tensor", "check_strided_map", "check_broadcast_zip", "check_axis_reduce",
                                "check_reduction", "one_block_reduce", "block_per_row", "reads_each_element_once",
                                "writes_each_element_once"],
    "gpucourse.matmul_checks": ["check_matrix_kernel", "transpose_tiles", "matmul_tiles", "warp_per_row",
                                "coarsened_grid", "coalesced", "conflict_free_shared_memory", "no_shared_memory",
                                "reads_per_thread", "float32_only"],
}


@pytest.mark.parametrize("old", sorted(OLD_NAMES))
def test_old_paths_hand_out_the_same_objects_and_say_where_they_went(old, monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    module = importlib.import_module(old)
    for name in OLD_NAMES[old]:
        with pytest.warns(DeprecationWarning, match=f"{old} is now gpucourse.grading: import {name} from there"):
            assert getattr(module, name) is getattr(grading, name)


@pytest.mark.parametrize("execution", ["autograde", "validate"])
def test_under_nbgrader_the_old_paths_are_silent(execution, monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", execution)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from gpucourse.checks import check_kernel
        from gpucourse.matmul_checks import float32_only
    assert (check_kernel, float32_only) == (grading.check_kernel, grading.float32_only)


def test_an_old_path_is_not_a_package():
    import gpucourse.checks

    assert not hasattr(gpucourse.checks, "__path__")
    with pytest.raises(ImportError):
        from gpucourse.checks import no_such_check  # noqa: F401
