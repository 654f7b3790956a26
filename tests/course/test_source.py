"""`show_source` and `source_of`: the library's code as the lectures show it."""

import re

import pytest

from gpucourse.course import show_source, source_of
from gpucourse.kernels import reduction


def test_lectures_can_show_the_source():
    assert source_of(reduction.sum_sequential).startswith("@cuda.jit\ndef sum_sequential(partial, a):")
    shown = show_source(reduction.warp_sum, reduction.sum_warp_shuffle)
    assert shown.data.startswith("```python\n@cuda.jit(device=True)\ndef warp_sum(value):")
    exec("def built_from_a_string(): pass", namespace := {})
    for nothing_to_show in ("sum_sequential", None, len, namespace["built_from_a_string"]):
        with pytest.raises(TypeError, match="show_source shows the code of a function, kernel or module defined in a "
                                            f"cell or a .py file, not {re.escape(repr(nothing_to_show))}"):
            show_source(nothing_to_show)


def test_sources_can_leave_their_docstrings_out():
    """For a slide: the docstrings of a builder and of the functions inside it go, its code and comments stay."""
    from gpucourse.kernels import fusion

    whole, code = source_of(fusion.make_micro_tile), source_of(fusion.make_micro_tile, docstrings=False)
    assert '"""' in whole and '"""' not in code
    assert "def micro_tile_product(" in code and "# unsigned indices" in code
    assert set(code.splitlines()) <= set(whole.splitlines())
