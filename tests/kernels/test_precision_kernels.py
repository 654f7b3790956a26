"""Module 6's library: formats against ml_dtypes, the mma wrapper's PTX and emulation, fp16 kernels."""

import re

import ml_dtypes
import numpy as np
import pytest
from numba import cuda, float32, types

from gpucourse import simulated, trace
from gpucourse.kernels import precision as p
from gpucourse.run.assembler import ptx_for, resources_problem
from gpucourse.run.resources import kernel_resources
from gpucourse.run.sass import disassemble, sass_problem
from gpucourse.run.tuning import innermost_loops, ptx_counts
from gpucourse.simulator.errors import WarpFault

rng = np.random.default_rng(6)


@pytest.fixture(autouse=True)
def on_the_simulator():
    with simulated():
        yield


# -- formats ------------------------------------------------------------------------------------------
NUMPY_TYPES = {"fp32": (np.float32, np.uint32), "fp16": (np.float16, np.uint16),
               "bf16": (ml_dtypes.bfloat16, np.uint16), "fp8_e4m3": (ml_dtypes.float8_e4m3fn, np.uint8),
               "fp8_e5m2": (ml_dtypes.float8_e5m2, np.uint8)}


def awkward_values(fmt):
    """Random magnitudes over the whole range, exact ties between neighbours, subnormals, overflow, inf, NaN."""
    f = p.FORMATS[fmt]
    smallest = 2.0 ** (f.min_exponent - f.mantissa_bits)
    values = np.exp(rng.uniform(np.log(smallest / 4), np.log(f.max_finite * 2), 400)) * rng.choice([-1, 1], 400)
    stored = p.round_to(values[:100], fmt)
    ties = stored + np.copysign(p.ulp(stored, fmt) / 2, stored)  # half-way between two values
    special = [0.0, -0.0, smallest, smallest / 2, 1.5 * smallest, f.max_finite, np.inf, -np.inf, np.nan]
    return np.concatenate([values, ties[np.isfinite(ties)], special])


@pytest.mark.parametrize("fmt", list(p.FORMATS))
def test_round_to_and_bits_match_ml_dtypes(fmt):
    dtype, unsigned = NUMPY_TYPES[fmt]
    x = awkward_values(fmt)
    with np.errstate(over="ignore"):  # a tie past bf16's largest value is past float32's too: inf, as it should
        if fmt != "fp32":
            x = x.astype(np.float32).astype(np.float64)  # ml_dtypes converts from float32 (rounding once)
        expected = x.astype(dtype)
    np.testing.assert_array_equal(p.round_to(x, fmt), expected.astype(np.float64))
    patterns = expected.view(unsigned)
    width = 8 * np.dtype(unsigned).itemsize
    for value, pattern in zip(x[::7], patterns[::7]):
        b = p.bits(value, fmt)
        if not np.isnan(value):
            assert b.sign + b.exponent + b.mantissa == format(int(pattern), f"0{width}b"), (fmt, value)
            assert b.value == float(np.asarray(value).astype(dtype)) or np.isnan(b.value)


def test_ulp_and_bits_of_known_values():
    assert p.ulp(1.0, "fp16") == 2.0 ** -10 and p.ulp(2048.0, "fp16") == 2.0 and p.ulp(1.0, "bf16") == 2.0 ** -7
    assert p.ulp(2.0 ** -24, "fp16") == 2.0 ** -24  # subnormals share the smallest normal's spacing
    assert p.ulp(0.0, "fp16") == p.ulp(-0.0, "fp16") == 2.0 ** -24 and p.ulp(0.0, "fp32") == 2.0 ** -149  # zero too
    assert str(p.bits(1.0, "fp16")) == "0 01111 0000000000" and str(p.bits(-2.0, "bf16")) == "1 10000000 0000000"
    assert p.round_to(256.0 ** 2, "fp16") == np.inf and p.round_to(2049.0, "fp16") == 2048.0  # a tie to even
    with pytest.raises(ValueError, match="unknown format 'fp12'.*fp16"):
        p.bits(1.0, "fp12")


# -- the mma wrapper ------------------------------------------------------------------------------------
def test_fragment_layout_covers_each_matrix_once():
    layout = p.fragment_layout()
    for operand, (rows, cols) in {"a": (16, 8), "b": (8, 8), "c": (16, 8)}.items():
        cells = layout[operand].reshape(-1, 2)
        assert len({tuple(c) for c in cells}) == rows * cols == len(cells)
    lane = 5  # group 1, thread 1 in the PTX ISA's figures
    assert layout["a"][lane].tolist() == [[1, 2], [1, 3], [9, 2], [9, 3]]
    assert layout["b"][lane].tolist() == [[2, 1], [3, 1]]


def test_the_m16n8k16_layout_is_the_ptx_isas_cell_by_cell():
    """The PTX ISA's m16n8k16 .f16 fragments, written out from its table (not the library's formulas)."""
    layout = p.fragment_layout("m16n8k16")
    for lane in range(32):
        g, t = lane // 4, lane % 4  # groupID, threadID_in_group
        a = [(g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1),  # a0-a3: k 0-7
             (g, 2 * t + 8), (g, 2 * t + 9), (g + 8, 2 * t + 8), (g + 8, 2 * t + 9)]  # a4-a7: k 8-15
        b = [(2 * t, g), (2 * t + 1, g), (2 * t + 8, g), (2 * t + 9, g)]
        c = [(g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1)]
        assert [tuple(x) for x in layout["a"][lane]] == a and [tuple(x) for x in layout["b"][lane]] == b
        assert [tuple(x) for x in layout["c"][lane]] == c
    for operand, (rows, cols) in {"a": (16, 16), "b": (16, 8), "c": (16, 8)}.items():
        assert len({tuple(x) for x in layout[operand].reshape(-1, 2)}) == rows * cols  # each cell once
    assert all((p.fragment_layout()[o] == p.fragment_layout("m16n8k8")[o]).all() for o in "abc")  # lecture 06's
    with pytest.raises(ValueError, match="unknown mma shape 'm16n8k32'"):
        p.fragment_layout("m16n8k32")


def random_fragments(warps, shape):
    """Fragments of random A, B (fp16) and C (fp32) for ``warps`` warps, each warp its own magnitude, and the
    matrices."""
    depth = p.MMA_SHAPES[shape]
    scale = np.exp2(rng.integers(-6, 7, (warps, 1, 1)))
    A = (rng.standard_normal((warps, 16, depth)) * scale).astype(np.float16)
    B = rng.standard_normal((warps, depth, 8)).astype(np.float16)
    C = (rng.standard_normal((warps, 16, 8)) * scale).astype(np.float32)
    return [p.fragments_of(X, o, shape) for X, o in ((A, "a"), (B, "b"), (C, "c"))], (A, B, C)


def words(fragments):
    """Fragments of halves as uint32 words of two, the first in the low bits."""
    return np.ascontiguousarray(fragments).view(np.uint32)


def truncating_tensor_core(A, B, C, group: int) -> np.ndarray:
    """D = A @ B + C as Fasi et al. (2021) found tensor cores add: ``group`` exact products and the running sum
    aligned on the largest, the bits below fp32's 24 truncated, added exactly, the sum truncated to 24 bits."""
    def truncate(x, quantum):
        return np.trunc(x / quantum) * quantum

    D = C.astype(np.float64)
    for k0 in range(0, A.shape[-1], group):
        terms = [D] + [A[..., :, k, None].astype(np.float64) * B[..., None, k, :] for k in range(k0, k0 + group)]
        largest = np.max(np.abs(terms), axis=0)
        quantum = np.exp2(np.floor(np.log2(np.where(largest > 0, largest, 1.0))) - 23)
        total = sum(truncate(t, quantum) for t in terms)
        D = truncate(total, np.exp2(np.floor(np.log2(np.where(total != 0, np.abs(total), 1.0))) - 23))
    return D


@pytest.mark.parametrize("group", [4, 8, 16], ids=lambda g: f"{g} products at a time")
def test_the_bound_holds_for_tensor_cores_that_add_4_8_or_16_products_at_a_time(group):
    """`mma_error_bound` for any hardware: a T4 and a V100 add 4 products at a time, an A100 8 (Fasi et al.)."""
    rng = np.random.default_rng(group)
    K = 48
    A = (rng.standard_normal((64, 16, K)) * np.exp2(rng.integers(-8, 8, (64, 16, K)))).astype(np.float16)
    B = (rng.standard_normal((64, K, 8)) * np.exp2(rng.integers(-8, 8, (64, K, 8)))).astype(np.float16)
    C = rng.standard_normal((64, 16, 8)).astype(np.float32)
    exact = C + A.astype(np.float64) @ B.astype(np.float64)
    bound = p.mma_error_bound(K, np.abs(C) + np.abs(A.astype(np.float64)) @ np.abs(B.astype(np.float64)))
    error = np.abs(truncating_tensor_core(A, B, C, group) - exact)
    assert np.all(error <= bound)
    assert np.max(error / bound) > 0.02  # the bound is not loose by more than 50x for this hardware model


def test_the_m16n8k16_emulation_is_a_b_plus_c_and_two_chained_m16n8k8():
    (fa, fb, fc), (A, B, C) = random_fragments(5, "m16n8k16")
    D = p.matrix_of(p.emulate_mma_m16n8k16(fa, fb, fc), "c", "m16n8k16")
    exact = C.astype(np.float64) + A.astype(np.float64) @ B.astype(np.float64)
    bound = p.mma_error_bound(16, np.abs(C) + np.abs(A.astype(np.float64)) @ np.abs(B.astype(np.float64)))
    assert np.all(np.abs(D - exact) <= bound) and not np.all(np.abs(D - exact) <= bound / 40)
    # before sm_80 mma_m16n8k16 is two m16n8k8: a0-a3 and b0, b1 (k 0-7), then a4-a7 and b2, b3 (k 8-15);
    # the model adds in k order either way, so the bits are the same
    first = p.emulate_mma_m16n8k8(fa[..., :4], fb[..., :2], fc)
    np.testing.assert_array_equal(p.emulate_mma_m16n8k8(fa[..., 4:], fb[..., 2:], first), p.fragments_of(D, "c"))


@pytest.mark.parametrize("shape", ["m16n8k8", "m16n8k16"])
def test_word_fragments_are_their_halves_in_pairs_the_first_in_the_low_bits(shape):
    """A and B as uint32 words of two halves (a .f16x2 register: a0 in the low 16 bits, a1 in the high) give the
    emulation the same D, bit for bit, as the halves; so do the words held in a wider integer type."""
    (fa, fb, fc), _ = random_fragments(3, shape)
    emulate = p.emulate_mma_m16n8k8 if shape == "m16n8k8" else p.emulate_mma_m16n8k16
    words_a, words_b = words(fa), words(fb)  # little-endian: the even element is the low half
    assert words_a.shape[-1] * 2 == fa.shape[-1]
    low = (words_a[..., 0] & 0xFFFF).astype(np.uint16).view(np.float16)
    np.testing.assert_array_equal(low, fa[..., 0])  # a0 in the low bits of the first register, as PTX has it
    D = emulate(fa, fb, fc)
    np.testing.assert_array_equal(emulate(words_a, words_b, fc), D)
    np.testing.assert_array_equal(emulate(words_a.astype(np.int64), fb, fc), D)  # and one operand packed only
    swapped = ((words_a >> 16) | (words_a << 16)).astype(np.uint32)  # the halves the other way round
    assert not np.array_equal(emulate(swapped, words_b, fc), D)


def ptx_layout():
    """The PTX ISA's m16n8k8 .f16 fragment layout, written out again from its formulas (not the library's)."""
    a, b, c = np.zeros((32, 4, 2), int), np.zeros((32, 2, 2), int), np.zeros((32, 4, 2), int)
    for lane in range(32):
        group, tig = lane >> 2, lane % 4
        for i in range(4):
            a[lane, i] = c[lane, i] = (group if i < 2 else group + 8, tig * 2 + (i & 1))
        for i in range(2):
            b[lane, i] = (tig * 2 + i, group)
    return a, b, c


@cuda.jit
def mma_each_warp(D, A, B, C):
    """Each warp w computes D[w] = A[w] @ B[w] + C[w] from the fragments its lanes hold ([w, lane, element])."""
    w, lane = cuda.grid(1) // 32, cuda.threadIdx.x % 32
    a = (A[w, lane, 0], A[w, lane, 1], A[w, lane, 2], A[w, lane, 3])
    b = (B[w, lane, 0], B[w, lane, 1])
    c = (C[w, lane, 0], C[w, lane, 1], C[w, lane, 2], C[w, lane, 3])
    d = p.mma_m16n8k8(a, b, c)
    for i in range(4):
        D[w, lane, i] = d[i]


def test_mma_emulation_inside_a_kernel_matches_a_numpy_model_of_the_layout():
    warps = 6
    scale = np.exp2(rng.integers(-6, 7, (warps, 1, 1)))  # each warp its own magnitude
    A = (rng.standard_normal((warps, 16, 8)) * scale).astype(np.float16)
    B = rng.standard_normal((warps, 8, 8)).astype(np.float16)
    C = (rng.standard_normal((warps, 16, 8)) * scale).astype(np.float32)
    la, lb, lc = ptx_layout()
    frag_a, frag_b = A[:, la[..., 0], la[..., 1]], B[:, lb[..., 0], lb[..., 1]]
    frag_c = C[:, lc[..., 0], lc[..., 1]]
    D = np.full((warps, 32, 4), np.nan, np.float32)
    mma_each_warp[3, 64](D, frag_a, frag_b, frag_c)
    got = np.empty((warps, 16, 8), np.float32)
    got[:, lc[..., 0], lc[..., 1]] = D
    # The simulator (every test here) runs the model bit for bit: fp16 products exact in fp32, fp32 sums in k
    # order, each rounded.
    model = C.copy()
    for k in range(8):
        model = model + A[:, :, k, None].astype(np.float32) * B[:, None, k, :].astype(np.float32)
    np.testing.assert_array_equal(got, model)
    # A GPU's tensor cores add otherwise (aligned, truncated): both are within the bound of the float64 result.
    exact = C.astype(np.float64) + A.astype(np.float64) @ B.astype(np.float64)
    bound = p.mma_error_bound(8, np.abs(C) + np.abs(A.astype(np.float64)) @ np.abs(B.astype(np.float64)))
    assert np.all(np.abs(got - exact) <= bound) and np.all(np.abs(model - exact) <= bound)
    assert not np.all(np.abs(model - exact) <= bound / 20)  # the bound is not loose by more than 20x


@cuda.jit
def mma16_each_warp(D, A, B, C):
    """`mma_each_warp` with mma_m16n8k16: fragments of 8, 4 and 4 elements."""
    w, lane = cuda.grid(1) // 32, cuda.threadIdx.x % 32
    a = (A[w, lane, 0], A[w, lane, 1], A[w, lane, 2], A[w, lane, 3],
         A[w, lane, 4], A[w, lane, 5], A[w, lane, 6], A[w, lane, 7])
    b = (B[w, lane, 0], B[w, lane, 1], B[w, lane, 2], B[w, lane, 3])
    c = (C[w, lane, 0], C[w, lane, 1], C[w, lane, 2], C[w, lane, 3])
    d = p.mma_m16n8k16(a, b, c)
    for i in range(4):
        D[w, lane, i] = d[i]


def test_mma_m16n8k16_inside_a_kernel_runs_the_emulation_for_each_warp():
    (fa, fb, fc), (A, B, C) = random_fragments(4, "m16n8k16")
    D = np.full((4, 32, 4), np.nan, np.float32)
    mma16_each_warp[2, 64](D, fa, fb, fc)
    np.testing.assert_array_equal(D, p.emulate_mma_m16n8k16(fa, fb, fc))
    exact = C.astype(np.float64) + A.astype(np.float64) @ B.astype(np.float64)
    bound = p.mma_error_bound(16, np.abs(C) + np.abs(A.astype(np.float64)) @ np.abs(B.astype(np.float64)))
    assert np.all(np.abs(p.matrix_of(D, "c") - exact) <= bound)


@cuda.jit
def mma16_words_each_warp(D, A, B, C):
    """`mma16_each_warp` with A and B as uint32 words of two halves: 4 and 2 words per lane."""
    w, lane = cuda.grid(1) // 32, cuda.threadIdx.x % 32
    a = (A[w, lane, 0], A[w, lane, 1], A[w, lane, 2], A[w, lane, 3])
    c = (C[w, lane, 0], C[w, lane, 1], C[w, lane, 2], C[w, lane, 3])
    d = p.mma_m16n8k16(a, (B[w, lane, 0], B[w, lane, 1]), c)
    for i in range(4):
        D[w, lane, i] = d[i]


def test_mma_m16n8k16_takes_word_fragments_as_its_registers():
    (fa, fb, fc), _ = random_fragments(4, "m16n8k16")
    D = np.full((4, 32, 4), np.nan, np.float32)
    mma16_words_each_warp[2, 64](D, words(fa), words(fb), fc)
    np.testing.assert_array_equal(D, p.emulate_mma_m16n8k16(fa, fb, fc))
    signature = (types.float32[:, :, :], types.uint32[:, :, :], types.uint32[:, :, :], types.float32[:, :, :])
    ptx, _ = cuda.compile_ptx(mma16_words_each_warp.py_func, signature, cc=(8, 0))
    mma = [line.strip() for line in ptx.splitlines() if "mma.sync" in line]
    assert len(mma) == 1 and len(re.findall(r"%r\d+", mma[0])) == 6
    # the words loaded are the registers the mma takes: nothing splits or joins halves on the way
    loads = re.findall(r"\bld(?:\.global)?\.u32\b", ptx)
    assert len(loads) == 6 and not re.search(r"\.[bfsu]16\b|prmt", ptx.split(mma[0])[0])


@pytest.mark.parametrize("cc, instructions", [((8, 0), [p.MMA_K16_PTX + " {%f", "{%r", "{%r", "{%f"]),
                                              ((7, 5), [p.MMA_PTX + " {%f", "{%r", "{%r", "{%f"] * 2)],
                         ids=["sm_80: one m16n8k16", "sm_75: two m16n8k8"])
def test_mma_m16n8k16_compiles_to_one_instruction_from_sm_80_and_to_two_m16n8k8_before(cc, instructions):
    signature = (types.float32[:, :, :], types.float16[:, :, :], types.float16[:, :, :], types.float32[:, :, :])
    ptx, _ = cuda.compile_ptx(mma16_each_warp.py_func, signature, cc=cc)
    found = [line.strip() for line in ptx.splitlines() if "mma.sync" in line]
    operands = [part.strip()[:len(start)] for line in found for part, start in
                zip(line.split("},"), instructions[:4])]
    assert len(found) == len(instructions) // 4 and operands == instructions
    registers = [len(re.findall(r"%r\d+", line)) for line in found]  # A's and B's 32-bit registers
    assert registers == ([6] if cc >= (8, 0) else [3, 3])


def test_the_compiled_code_read_for_an_architecture_is_compiled_for_it():
    """kernel_resources and inspect_compiled read what numba-cuda compiles on that GPU: m16n8k16 from sm_80 on."""
    signature = (types.float32[:, :, ::1], types.float16[:, :, ::1], types.float16[:, :, ::1],
                 types.float32[:, :, ::1])
    for architecture, mma in (("sm_90", p.MMA_K16_PTX), ("sm_80", p.MMA_K16_PTX), ("sm_75", p.MMA_PTX)):
        ptx = ptx_for(mma16_each_warp, signature, architecture)
        assert f".target {architecture}" in ptx and set(re.findall(r"mma\.sync\.\S+", ptx)) == {mma}


@cuda.jit
def mma_in_a_branch(D, A, B):
    lane = cuda.threadIdx.x
    if lane < 16:
        a = (A[lane], A[lane], A[lane], A[lane])
        d = p.mma_m16n8k8(a, (B[lane], B[lane]), (float32(0), float32(0), float32(0), float32(0)))
        D[lane] = d[0]


def test_mma_needs_the_whole_warp():
    A, B = np.ones(32, np.float16), np.ones(32, np.float16)
    D = np.zeros(32, np.float32)
    with pytest.raises(WarpFault, match="needs all 32 lanes of a warp"):
        mma_in_a_branch[1, 32](D, A, B)
    with pytest.raises(WarpFault, match="has only 16 threads"):
        mma_each_warp[1, 16](np.zeros((1, 32, 4), np.float32), np.ones((1, 32, 4), np.float16),
                             np.ones((1, 32, 2), np.float16), np.ones((1, 32, 4), np.float32))


@pytest.mark.parametrize("cc", [(7, 5), (8, 0)])
def test_the_small_tensor_core_gemm_compiles_to_mma_sync(cc):
    signature = (types.float32[:, :], types.float16[:, :], types.float16[:, :])
    ptx, _ = cuda.compile_ptx(p.gemm_tensor_core.py_func, signature, cc=cc)
    instructions = [line.strip() for line in ptx.splitlines() if p.MMA_PTX in line]
    assert len(instructions) == 2 and all(i.startswith(p.MMA_PTX + " {%f") for i in instructions)
    assert "ld.local" not in ptx  # the accumulators stay in registers


def smallest_loop_with(ptx, *needles):
    """The body of the smallest PTX loop (a label to a branch back to it) that holds every one of ``needles``."""
    labels = {m.group(1): m.start() for m in re.finditer(r"^(\$L__\w+):", ptx, re.M)}
    loops = [ptx[labels[m.group(1)]:m.end()] for m in re.finditer(r"\bbra(?:\.uni)?\s+(\$L__\w+);", ptx)
             if m.group(1) in labels and labels[m.group(1)] < m.start()]
    return min((loop for loop in loops if all(n in loop for n in needles)), key=len)


@pytest.mark.parametrize("cc, mma", [((8, 0), p.MMA_K16_PTX), ((7, 5), p.MMA_PTX)], ids=["sm_80", "sm_75"])
def test_the_tiled_tensor_core_gemm_is_double_buffered_with_m16n8k16(cc, mma):
    signature = (types.float32[:, ::1], types.float16[:, ::1], types.float16[:, ::1])  # what gemm() passes
    ptx = ptx_for(p.gemm_tensor_core_tiled, signature, f"sm_{cc[0]}{cc[1]}")  # with its launch bounds
    # m16n8k16 from sm_80 on (a T4 runs each as two m16n8k8): 16 per warp and step of 16 along K
    assert set(re.findall(r"mma\.sync\.\S+", ptx)) == {mma}
    assert ptx.count(mma) % (16 if cc >= (8, 0) else 32) == 0
    assert "ld.local" not in ptx  # accumulators, fragments and the chunks on their way: registers
    if resources_problem() is None:  # launch bounds (256, 2): 2 blocks of 256 threads per SM, nothing spilled
        used = kernel_resources(p.gemm_tensor_core_tiled, signature, f"sm_{cc[0]}{cc[1]}")  # the same PTX
        assert used.registers <= 128 and used.spilled_bytes == 0 and used.local_bytes == 0
    # two copies of each tile, in uint32 words of two halves: A's 2 x 128 rows of 20 words (16 words of k and 4 of
    # padding), B's 2 x 16 rows of k pairs of 136 words: 37 KiB of the 48 a block may declare statically
    assert re.findall(r"\.shared \.align 16 \.b8 \w+\[(\d+)\];", ptx) == [str(2 * 128 * 20 * 4),
                                                                            str(2 * 16 * 136 * 4)]
    # the loop over steps of K: the next step's 16-byte loads issued before the mma, stored into the other
    # copy after them, and ONE barrier (single-buffered, a step needs two)
    step = smallest_loop_with(ptx, mma, "bar.sync")
    assert step.count("bar.sync") == 1
    assert step.index("ld.global.v4.u32") < step.index(mma) < step.rindex(mma) < step.rindex("st.shared.v4.u32")
    assert step.count("ld.global.v4.u32") == 2 * p.TC_VECTORS  # A's and B's chunks (the fallback: ld.global.u16)
    # the halves stay in pairs, as words, from global to shared memory: 16-byte stores only (2 of A's chunks, 2 of
    # B's k-pair words), no 16-bit register moves or splits of a word into halves, and 8 byte permutations that
    # turn B's two rows of 8 halves into 8 words of k pairs (the one-half-per-load path packs with shifts)
    assert re.findall(r"st\.shared\.\S+", step) == ["st.shared.v4.u32"] * (2 * p.TC_VECTORS)
    assert not re.search(r"\b(mov|cvt\.u16)\.u16\b|cvt\.u16\.u32", step)
    assert step.count("prmt.b32") == 8
    # the mma loop: unsigned indices into the tiles (no wrap-around); A's fragment (4 registers) one ldmatrix
    # per tile, B's 2 registers one 4-byte shared load each, per step of 16; no 16-bit loads
    mma_loops = [loop for loop in innermost_loops(ptx) if mma in loop]
    assert len(mma_loops) == 1 and ptx_counts(mma_loops[0])["inner_loop_sign_tests"] == 0
    passes = mma_loops[0].count(mma) // (p.TC_MMA_M * p.TC_MMA_N * (1 if cc >= (8, 0) else 2))
    shared_loads = re.findall(r"ld\.shared\.\S+", mma_loops[0])
    assert shared_loads == ["ld.shared.u32"] * 2 * p.TC_MMA_N * passes
    assert mma_loops[0].count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == p.TC_MMA_M * passes


@pytest.mark.parametrize("cc, mma", [((8, 0), p.MMA_K16_PTX), ((7, 5), p.MMA_PTX)], ids=["sm_80", "sm_75"])
def test_the_async_tensor_core_gemm_copies_with_cp_async_into_two_stages(cc, mma):
    signature = (types.float32[:, ::1], types.float16[:, ::1], types.float16[:, ::1])  # what gemm() passes
    ptx = ptx_for(p.gemm_tensor_core_async, signature, f"sm_{cc[0]}{cc[1]}")  # with its launch bounds
    assert set(re.findall(r"mma\.sync\.\S+", ptx)) == {mma} and "ld.local" not in ptx
    if resources_problem() is None:  # launch bounds (256, 2): 2 blocks of 256 threads per SM, nothing spilled
        used = kernel_resources(p.gemm_tensor_core_async, signature, f"sm_{cc[0]}{cc[1]}")
        assert used.registers <= 128 and used.spilled_bytes == 0 and used.local_bytes == 0
    # 2 stages of each tile: A's 2 x 128 rows of 20 words, B's 2 x 32 rows of B of 68 words (64 and 4 of padding)
    assert re.findall(r"\.shared \.align 16 \.b8 \w+\[(\d+)\];", ptx) == [str(2 * 128 * 20 * 4), str(2 * 32 * 68 * 4)]
    step = smallest_loop_with(ptx, mma, "bar.sync")
    assert step.count("bar.sync") == 1
    # the mma loop: A's fragments by ldmatrix, B's by ldmatrix .trans (one per two n tiles), no other shared load
    mma_loops = [loop for loop in innermost_loops(ptx) if mma in loop]
    assert len(mma_loops) == 1 and ptx_counts(mma_loops[0])["inner_loop_sign_tests"] == 0
    passes = mma_loops[0].count(mma) // (p.TC_MMA_M * p.TC_MMA_N * (1 if cc >= (8, 0) else 2))
    assert not re.findall(r"ld\.shared\.\S+", mma_loops[0])
    assert mma_loops[0].count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == p.TC_MMA_M * passes
    assert mma_loops[0].count("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16") == p.TC_MMA_N // 2 * passes
    if cc < (8, 0):  # no cp.async before sm_80: 16-byte loads and stores in its place
        assert "cp.async" not in ptx and step.count("ld.global.v4.u32") == 2 * p.TC_VECTORS
        return
    # a step: wait for its own copies, one barrier, then the next step's 4 copies (one group), then the mma; the
    # 16-byte path has no global load into registers (the other path: one half per load)
    copies = re.findall(r"cp\.async\.cg\.shared\.global \[%r\d+\], \[%rd\d+\], 16, %r\d+;", step)
    assert len(copies) == 2 * p.TC_VECTORS and "ld.global.v4" not in ptx
    assert step.index("cp.async.wait_group 0;") < step.index("bar.sync") < step.index("cp.async.cg") \
        < step.index("cp.async.commit_group;") < step.index(mma)
    assert ptx.count("cp.async.commit_group;") == 2 and ptx.count("cp.async.wait_group") == 1  # the prologue's too


@pytest.mark.skipif(sass_problem() is not None or resources_problem() is not None,
                    reason="needs nvdisasm (the cu13 extra installs it) and nvJitLink")
def test_the_async_tensor_core_gemm_has_ldgsts_and_ldmatrix_trans_in_its_sm_90_sass():
    """The SASS of the copies and B's fragment loads: LDGSTS (cp.async, 16 bytes, L1 bypassed: .cg) and
    LDSM.16.MT88.4 (ldmatrix .x4 .trans), and no global load into registers on the 16-byte path."""
    signature = (types.float32[:, ::1], types.float16[:, ::1], types.float16[:, ::1])
    sass = disassemble(ptx_for(p.gemm_tensor_core_async, signature, "sm_90"), "sm_90")
    assert "LDGSTS.E.BYPASS.128" in sass and "LDSM.16.MT88.4" in sass and "LDSM.16.M88.4" in sass
    assert "LDG.E.128" not in sass and "DEPBAR" in sass


def test_the_async_tensor_core_gemm_copies_coalesced_and_free_of_bank_conflicts():
    """One block, 2 steps: each warp's copy reads 512 bytes of A or B in 16 sectors, writes its 16 bytes a lane
    with no bank conflict, and B's fragments come by ldmatrix .trans free of conflicts (the simulator reads each
    matrix's 8 rows as the hardware does). Every element of A and B is read once."""
    M, K, N = 128, 64, 128
    A = rng.standard_normal((M, K)).astype(np.float16)
    B = rng.standard_normal((K, N)).astype(np.float16)
    C = np.full((M, N), np.nan, np.float32)
    with trace() as t:
        p.launch_gemm(p.gemm_tensor_core_async, C, A, B)
    np.testing.assert_array_equal(C, p.gemm(A, B, p.gemm_fp16_fp32acc))
    for name in ("A", "B"):
        t.assert_reads_per_element(name, exactly=1)
        reads = t.array(name).instructions["read"]
        assert reads.sectors == 16 * reads.requests and reads.lanes == 32 * reads.requests
    t.assert_no_bank_conflicts("tile_b")
    assert t.array("tile_a").instructions["write"].worst == 1
def test_wrong_fragments_are_a_typing_error():
    def kernel(D, A):
        d = p.mma_m16n8k8((A[0], A[1]), (A[0], A[1]), (D[0], D[1], D[2], D[3]))
        D[0] = d[0]

    with pytest.raises(Exception, match="mma_m16n8k8: a_frag must be a tuple of 4 float16"):
        cuda.compile_ptx(kernel, (types.float32[:], types.float16[:]), cc=(7, 5))

    def kernel16(D, A):
        d = p.mma_m16n8k16((A[0], A[1], A[2], A[3]), (A[0], A[1], A[2], A[3]), (D[0], D[1], D[2], D[3]))
        D[0] = d[0]

    with pytest.raises(Exception, match="mma_m16n8k16: a_frag must be a tuple of 8 float16"):
        cuda.compile_ptx(kernel16, (types.float32[:], types.float16[:]), cc=(8, 0))
    with pytest.raises(Exception, match=r"mma_m16n8k16: b_frag must be a tuple of 4 float16 values \(or of 2 uint32"):
        cuda.compile_ptx(kernel16, (types.float32[:], types.uint32[:]), cc=(8, 0))  # 4 words of A: right; of B: no


# -- kernels ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("kernel", p.GEMM_KERNELS, ids=lambda k: k.py_func.__name__)
@pytest.mark.parametrize("shape", [(16, 8, 8), (37, 29, 45), (70, 50, 33), (1, 3, 1), (130, 40, 129)], ids=str)
def test_gemms_are_within_the_fp32_accumulation_bound(kernel, shape):
    M, K, N = shape
    A = (rng.standard_normal((M, K)) * rng.uniform(0.5, 4)).astype(np.float16)
    B = rng.standard_normal((K, N)).astype(np.float16)
    C = np.full((M, N), np.nan, np.float32)
    p.launch_gemm(kernel, C, A, B)
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    bound = (K + 1) * 2.0 ** -24 * (np.abs(A64) @ np.abs(B64))  # K fp32 additions; the products are exact
    assert np.all(np.abs(C - A64 @ B64) <= bound)


@pytest.mark.parametrize("kernel", [p.gemm_tensor_core_tiled, p.gemm_tensor_core_async], ids=["tiled", "async"])
def test_the_tiled_tensor_core_gemms_give_the_same_bits_from_their_16_byte_and_their_scalar_copies(kernel):
    """K and N multiples of 8 and 16-byte aligned rows: 16-byte copies (contiguous, and views of padded rows);
    a view one half off: the scalar copies. The same products in the same order: the same bits."""
    M, K, N = 37, 40, 136  # two blocks of 128 columns, the second 8 wide; a second step of K, 8 deep
    A = (rng.standard_normal((M, K)) * rng.uniform(0.5, 4, (M, 1))).astype(np.float16)
    B = (rng.standard_normal((K, N)) * rng.uniform(0.5, 4, N)).astype(np.float16)
    padded_a, padded_b = np.full((M, K + 8), np.nan, np.float16), np.full((K, N + 16), np.nan, np.float16)
    padded_a[:, :K], padded_b[:, :N] = A, B  # NaN after each row: read by mistake, it would spread to C
    shifted_a, shifted_b = np.full((M, K + 1), np.nan, np.float16), np.full((K, N + 1), np.nan, np.float16)
    shifted_a[:, 1:], shifted_b[:, 1:] = A, B  # one half in: no row 16-byte aligned
    results = []
    for a, b in ((A, B), (padded_a[:, :K], padded_b[:, :N]), (shifted_a[:, 1:], shifted_b[:, 1:])):
        C = np.full((M, N), np.nan, np.float32)
        p.launch_gemm(kernel, C, a, b)
        results.append(C)
    exact = A.astype(np.float64) @ B.astype(np.float64)
    bound = (K + 1) * 2.0 ** -24 * (np.abs(A.astype(np.float64)) @ np.abs(B.astype(np.float64)))
    assert np.all(np.abs(results[0] - exact) <= bound)
    np.testing.assert_array_equal(results[1], results[0])
    np.testing.assert_array_equal(results[2], results[0])


@pytest.mark.parametrize("kernel", [p.gemm_tensor_core_tiled, p.gemm_tensor_core_async], ids=["tiled", "async"])
@pytest.mark.parametrize("path", ["16-byte", "one half per load"])
@pytest.mark.parametrize("K", [8, 32, 40, 96, 77, 264], ids=lambda K: f"K{K}")
def test_the_tiled_tensor_core_gemms_over_1_2_3_and_many_steps_of_k(K, path, kernel):
    """Steps of 32 along K through the two copies of the tiles: 1 (K = 8, 32), 2 (40), 3 (96, and 77: not a
    multiple of 8, the one-half-per-load chunks) and 9 (264); two blocks in each direction; each through the
    16-byte chunks where K allows, and through the one-half-per-load chunks (views one half off, N = 131: no row
    16-byte aligned, chunks cut at the edge). Its products are added in k order like gemm_fp16_fp32acc's: the
    same bits, and within the bound of the exact product."""
    M, N = 133, 136 if path == "16-byte" else 131
    A = (rng.standard_normal((M, K)) * rng.uniform(0.5, 4, (M, 1))).astype(np.float16)
    B = rng.standard_normal((K, N)).astype(np.float16)
    a, b = A, B
    if path != "16-byte":
        a, b = np.full((M, K + 1), np.nan, np.float16)[:, 1:], np.full((K, N + 1), np.nan, np.float16)[:, 1:]
        a[...], b[...] = A, B
    C, reference = np.full((M, N), np.nan, np.float32), np.full((M, N), np.nan, np.float32)
    p.launch_gemm(kernel, C, a, b)
    p.launch_gemm(p.gemm_fp16_fp32acc, reference, A, B)
    np.testing.assert_array_equal(C, reference)
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    assert np.all(np.abs(C - A64 @ B64) <= p.mma_error_bound(K, np.abs(A64) @ np.abs(B64)))


def test_the_gemms_add_in_the_same_order():
    A = rng.standard_normal((40, 72)).astype(np.float16)
    B = rng.standard_normal((72, 140)).astype(np.float16)
    first = p.gemm(A, B, p.gemm_fp16_fp32acc)
    for kernel in (p.gemm_tensor_core, p.gemm_tensor_core_tiled, p.gemm_tensor_core_async):
        np.testing.assert_array_equal(p.gemm(A, B, kernel), first)


def test_gemm_explains_bad_arguments():
    A, B = np.ones((4, 3), np.float16), np.ones((5, 2), np.float16)
    with pytest.raises(ValueError, match="A's columns = B's rows"):
        p.launch_gemm(p.gemm_tensor_core, np.zeros((4, 2), np.float32), A, B)
    with pytest.raises(ValueError, match="must be float16 and C float32"):
        p.launch_gemm(p.gemm_tensor_core, np.zeros((4, 2), np.float32), A.astype(np.float32), B)
    with pytest.raises(ValueError, match="must be 2-D matrices, got 1-D and 2-D"):
        p.gemm(np.ones(3), B)


def test_a_running_fp16_sum_stalls_at_2048():
    ones = np.ones(3000, np.float16)
    assert p.launch_sum(p.sum_fp16, ones)[0] == 2048  # 2048 + 1 is a tie, rounded to even: 2048
    assert p.launch_sum(p.sum_fp16_fp32acc, ones)[0] == 3000
    x = rng.uniform(0, 1, 500).astype(np.float16)
    running = np.float16(0)
    for value in x:
        running = np.float16(running + value)
    assert p.launch_sum(p.sum_fp16, x)[0] == running
    with pytest.raises(ValueError, match="1-D float16"):
        p.launch_sum(p.sum_fp16, ones.astype(np.float32))


@pytest.mark.parametrize("blocks, threads", [(1, 32), (3, 64), (8, 256)])
def test_maps_store_in_their_own_format(blocks, threads):
    x = rng.standard_normal(1000).astype(np.float32) * 100
    out16, out32 = np.full(1000, np.nan, np.float16), np.full(1000, np.nan, np.float32)
    p.launch_map(p.map_fp16, out16, x.astype(np.float16), blocks, threads)
    p.launch_map(p.map_fp32, out32, x, blocks, threads)
    np.testing.assert_array_equal(out16, (x.astype(np.float16).astype(np.float32) * 2 + 1).astype(np.float16))
    np.testing.assert_array_equal(out32, x * np.float32(2) + np.float32(1))


@cuda.jit
def add_atomically(total, x):
    i = cuda.grid(1)
    if i < x.shape[0]:
        cuda.atomic.add(total, 0, x[i])


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_16_bit_float_atomics_are_refused_as_the_gpu_compiler_does(dtype, monkeypatch):
    from gpucourse.run.ptx import KernelCompileError
    from gpucourse.simulator.errors import UnsupportedInKernel

    x = np.ones(40, dtype)
    with pytest.raises(KernelCompileError, match="would not compile"):
        add_atomically[2, 32](np.zeros(1, dtype), x)
    monkeypatch.setenv("GPUCOURSE_PTX_CHECK", "off")  # the simulator refuses it on its own too
    with pytest.raises(UnsupportedInKernel, match=r"no 16-bit float atomics\): accumulate in a float32 array"):
        add_atomically[2, 32](np.zeros(1, dtype), x)
    total = np.zeros(1, np.float32)
    add_atomically[2, 32](total, x.astype(np.float32))
    assert total[0] == 40


@cuda.jit
def multiply_add_fp16(out, x, y, z):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = x[i] * y[i] + z[i]  # numba types each operation float16 (mul.f16, add.f16)


def test_fp16_arithmetic_rounds_to_fp16_after_each_operation():
    x, y, z = (rng.uniform(1, 2, 500).astype(np.float16) for _ in range(3))
    out = np.full(500, np.nan, np.float16)
    multiply_add_fp16[4, 128](out, x, y, z)
    per_operation = (x * y).astype(np.float16) + z  # NumPy rounds each float16 operation to float16
    once = (x.astype(np.float64) * y + z).astype(np.float16)
    np.testing.assert_array_equal(out, per_operation)
    assert (per_operation != once).sum() > 10  # the two roundings differ often enough for the test to tell
