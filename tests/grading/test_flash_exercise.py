"""Assignment 5's flash attention: `make_flash_exercise` around an online-softmax update, and the checks that
take marks from plausible wrong updates (no rescale, the whole warp's max, half the group's max, exp for exp2, no mask,
a loop bound known only at run time, a float64 constant, the diagonal masked, a row of p not stored)."""

import math

import numpy as np
import pytest
from numba import cuda, float32
from numba.core import types

from gpucourse import simulated
from gpucourse.grading import CheckFailed, float32_only
from gpucourse.grading import fusion as gf
from gpucourse.kernels.fusion import attention_reference

ROWS, ROW_STEP, LANES = gf.EXERCISE_ROWS, gf.EXERCISE_ROW_STEP, gf.EXERCISE_LANES
KEYS, COLS = gf.EXERCISE_KEYS // LANES, gf.EXERCISE_MAX_D // LANES
BQ, BKEYS, THREADS = gf.EXERCISE_QUERIES, gf.EXERCISE_KEYS, gf.EXERCISE_THREADS
SHAPES = [(1, 16), (45, 32), (70, 64)]
ARGTYPES = (types.float32[:, ::1],) * 4


@pytest.fixture(autouse=True)
def on_the_simulator():
    with simulated():
        yield


def make_update(rescale=True, offsets=(2, 1), exp=math.exp2, mask=True, trimmed=False, float64_base=False,
                diagonal=False, stored_rows=ROWS, max_before_mask=False, max_over=KEYS):
    """The online-softmax update of one tile, or a broken variant of it."""

    @cuda.jit(device=True)
    def update(s, m, l, acc, p_tile, row, col, start, first, N):
        for i in range(ROWS):
            query = first + row + i * ROW_STEP
            top = float32(-math.inf)
            keys = min(KEYS, (N - start - col + LANES - 1) // LANES) if trimmed else KEYS
            for j in range(keys):
                key = start + col + j * LANES
                if max_before_mask and j < max_over:
                    top = max(top, s[i, j])
                if mask and (key >= N or key > query or (diagonal and key == query)):
                    s[i, j] = float32(-math.inf)
                if not max_before_mask and j < max_over:
                    top = max(top, s[i, j])
            for offset in offsets:
                top = max(top, cuda.shfl_xor_sync(0xFFFFFFFF, top, offset))
            m_new = max(m[i], top)
            base = m_new if m_new != float32(-math.inf) else (0.0 if float64_base else float32(0))
            factor = exp(m[i] - base) if rescale else float32(1)
            m[i] = m_new
            l[i] *= factor
            for j in range(COLS):
                acc[i, j] *= factor
            for j in range(KEYS):
                p = exp(s[i, j] - base) if j < keys else float32(0)
                l[i] += p
                if i < stored_rows:
                    p_tile[row + i * ROW_STEP, col + j * LANES] = p

    return gf.make_flash_exercise(update)


def check(kernel, shapes=((45, 32),), **kwargs):
    """One launch of 2 blocks by default: the large query row (44) shares its warp with 11 other rows."""
    gf.check_attention(kernel, shapes, block_rows=BQ, key_block=BKEYS, threads=THREADS, quiet=True, **kwargs)


def test_the_right_update_passes_every_check(capsys):
    kernel = make_update()
    check(kernel, SHAPES)
    check(kernel, budget=float32_only())
    gf.check_registers_only(kernel, ARGTYPES)
    assert "no local memory" in capsys.readouterr().out


@pytest.mark.parametrize("wrong", [dict(rescale=False), dict(offsets=(16, 8, 4, 2, 1)), dict(offsets=(1,)),
                                   dict(exp=math.exp), dict(mask=False)],
                         ids=["no rescale", "whole warp's max", "half the group's max", "exp for exp2", "no mask"])
def test_a_wrong_update_fails_the_attention_check(wrong):
    with pytest.raises(CheckFailed, match="is wrong"):
        check(make_update(**wrong))


@pytest.mark.parametrize("wrong, row", [(dict(max_before_mask=True), r"key \d+, in this query's future \(masked\)"),
                                        (dict(max_over=KEYS - 1), r"key \d+, the last of its tile")],
                         ids=["the tile's max before the mask", "the max over part of the tile"])
def test_a_tile_max_over_other_keys_than_the_query_sees_fails_on_its_planted_score(wrong, row):
    with pytest.raises(CheckFailed, match=row):
        check(make_update(**wrong), SHAPES)


def test_exp_where_the_scores_are_scaled_for_exp2_is_named():
    """The scores carry log2(e) / sqrt(d): exp of them is attention with every score times 1.44, which the check
    now says (a student-path review of 2026-11-30 got the generic 'check the running max...' for it)."""
    with pytest.raises(CheckFailed, match=r"every score multiplied by log2\(e\) = 1\.44: .*use math\.exp2"):
        check(make_update(exp=math.exp))


def test_a_max_over_the_whole_warp_is_named_by_the_rows_it_zeroes():
    """Offsets 16, 8 and 4 bring the planted large row's scores into its warp's other rows: every p of theirs
    underflows to 0 (the generic 'check the running max...' before a review of 2026-11-30)."""
    with pytest.raises(CheckFailed, match=r"its output is all 0, though query \d+ sees keys 0 to \d+: .*shuffle "
                                          r"offsets that stay within its row group; one that reaches further brings in "
                                          r"other rows' scores"):
        check(make_update(offsets=(16, 8, 4, 2, 1)), SHAPES)


@pytest.mark.parametrize("offsets, lanes", [((1,), r"2 of its 4 lanes \(shuffle offset 1 alone: lanes 4g and 4g \+ 1"),
                                            ((2,), r"2 of its 4 lanes \(shuffle offset 2 alone: lanes 4g and 4g \+ 2"),
                                            ((0,), r"1 of its 4 lanes \(no shuffle: each lane keeps its own max")],
                         ids=["offset 1 alone", "offset 2 alone", "no shuffle"])
def test_a_max_over_part_of_the_row_group_is_named(offsets, lanes):
    """Each part of the group subtracts its own max: the output matches the kernel emulated with those parts (the
    generic 'check the running max...' before a student-path review of assignment 5). Offset 0: a lane's own."""
    with pytest.raises(CheckFailed, match=rf"its output is what query \d+ gets when its max is taken over {lanes}.*"
                                          r"A row group is 4 consecutive lanes \(the same lane // 4\), which differ in "
                                          r"their 2 lowest bits: shuffle with offsets 2 and 1"):
        check(make_update(offsets=offsets), SHAPES)


@pytest.mark.parametrize("offsets, reach", [((16, 8), "16 and 8: they reach"), ((16, 8, 4), "16, 8 and 4: they reach"),
                                            ((8, 4), "8 and 4: they reach")], ids=["16 8", "lecture 5's 16 8 4", "8 4"])
def test_a_max_shuffled_into_other_row_groups_is_named_by_its_offsets(offsets, reach):
    """Offsets past the row group mix other queries' maxes into a lane's, differently for each lane of the group:
    the output matches the kernel emulated with those offsets (the generic 'check the running max...' before)."""
    with pytest.raises(CheckFailed, match=rf"its output is what query \d+ gets when the tile's max is shuffled with "
                                          rf"offsets {reach} lanes of other row "
                                          r"groups.*shuffle with offsets 2 and 1.*, not lecture 5's 16, 8 and 4"):
        check(make_update(offsets=offsets), SHAPES)


def make_misindexed_update(forget):
    """The right update but for the mask, whose query index leaves out ``first`` or whose key index ``start``."""

    @cuda.jit(device=True)
    def update(s, m, l, acc, p_tile, row, col, start, first, N):
        for i in range(ROWS):
            query = (0 if forget == "first" else first) + row + i * ROW_STEP
            top = float32(-math.inf)
            for j in range(KEYS):
                key = (0 if forget == "start" else start) + col + j * LANES
                if key >= N or key > query:
                    s[i, j] = float32(-math.inf)
                top = max(top, s[i, j])
            for offset in (2, 1):
                top = max(top, cuda.shfl_xor_sync(0xFFFFFFFF, top, offset))
            m_new = max(m[i], top)
            base = m_new if m_new != float32(-math.inf) else float32(0)
            factor = math.exp2(m[i] - base)
            m[i] = m_new
            l[i] *= factor
            for j in range(COLS):
                acc[i, j] *= factor
            for j in range(KEYS):
                p = math.exp2(s[i, j] - base)
                l[i] += p
                p_tile[row + i * ROW_STEP, col + j * LANES] = p

    return gf.make_flash_exercise(update)


@pytest.mark.parametrize("forget, message", [
    ("first", r"row 32 is wrong.*its output is attention over keys 0 to 0, as query 0 sees them: the mask compares the "
              r"key with the thread's row in its block, row \+ ROW_STEP \* i \(0\); the query is first \+ row"),
    ("start", r"row 0 is wrong.*its output is attention over every key whose place in its tile of 16 is at most 0 "
              r"\(keys 0, 16\): the mask compares the query with col \+ LANES \* j.*start \+ col \+ LANES \* j")])
def test_a_mask_that_leaves_first_or_start_out_of_its_index_is_named(forget, message):
    """A student-path review (2026-12-02) got the generic 'check the running max...' for both."""
    with pytest.raises(CheckFailed, match=f"(?s){message}"):
        check(make_misindexed_update(forget), SHAPES)


def test_the_emulated_update_with_the_right_offsets_is_attention():
    rng = np.random.default_rng(2)
    Q, K, V = (rng.standard_normal((45, 16)) for _ in range(3))
    expected = attention_reference(Q, K, V, True)
    for row in (0, 17, 44):
        np.testing.assert_allclose(gf.shuffled_max_attention(Q, K, V, row, (2, 1)), expected[row], atol=1e-12)


def test_a_masked_diagonal_and_an_unstored_row_of_p_are_named():
    with pytest.raises(CheckFailed, match=r"query 0 sees key 0: its sum l stayed 0. Either the mask hides key 0 \(mask "
                                          r"a key after the query, key > query, not key >= query\)"):
        check(make_update(diagonal=True))
    with pytest.raises(CheckFailed, match=r"online_softmax_tile stores every p it computes, 0 for a masked key, in "
                                          r"p_tile\[row \+ ROW_STEP \* i, col \+ LANES \* j\]") as failed:
        check(make_update(stored_rows=1))
    # the read is in the course's tile product: named by what it does, not by a line the student never saw
    assert "where the course's code multiplies p_tile by V:" in str(failed.value)
    assert "device function" not in str(failed.value) and "syncthreads" not in str(failed.value)


def test_a_run_time_loop_bound_puts_the_scores_in_local_memory():
    kernel = make_update(trimmed=True)
    check(kernel)  # right answers ...
    with pytest.raises(CheckFailed, match="loads and .* stores of local memory"):
        gf.check_registers_only(kernel, ARGTYPES)  # ... from local memory


def test_a_float64_constant_fails_the_float32_budget():
    with pytest.raises(CheckFailed, match="float64"):
        check(make_update(float64_base=True), budget=float32_only())
