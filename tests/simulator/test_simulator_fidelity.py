"""The simulator against compiled numba-cuda: a typing table and the idioms students write (issue 25).

TYPING: each case is an expression a kernel stores, in a typed array element or through a local. Its
expected type is the one numba-cuda's compiler gives it: the kernel is compiled for the case's argument
types on this machine (numba-cuda's typing and lowering, no GPU, no NVVM) and the type of the value that
its ``out[i] = ...`` stores is read from the typed IR. The simulator's is the dtype of the value it
stores, with the PTX check off (the simulator's own typing: what a laptop without NVVM has, and what an
expression gets anyway; a local gets the typemap's type when the check runs). Nothing here is a
hand-written table of types: a numba-cuda that types differently moves the expected column with it.

IDIOMS: what students write, each with what a GPU does: the same numbers (checked against NumPy in
numba's types), or a fault report where the GPU gives garbage, races or hangs (accumulating into a
fresh ``cuda.device_array`` that nothing zeroed gives whatever the memory held).
"""

import importlib.util
import math
import re

import numpy as np
import pytest
from numba import cuda, float32, types
from numba.cuda.compiler import compile_cuda
from numba.cuda.core import ir
from numba.np.numpy_support import from_dtype

import gpucourse
from gpucourse import simulated
from gpucourse.run import ptx
from gpucourse.simulator import (DataRace, DivergentBarrier, EndlessLoop, OutOfBounds,
                                 UninitializedRead, WarpFault, step_budget)
from gpucourse.simulator.arithmetic import dtype_of
from gpucourse.simulator.runtime import Runtime

RNG = np.random.default_rng(25)
N = 70  # three warps, the last one partly idle

F16, F32, F64 = np.float16, np.float32, np.float64
I8, I16, I32, I64, U8, U16, U32, U64, B = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                                           np.uint32, np.uint64, np.bool_)

# (name, expression of a[i], b[i] and the scalar argument s, how it is stored, dtypes of a, b and s)
TYPING = [
    ("int8_plus_int8", "a[i] + b[i]", "element", I8, I8, I32),
    ("int16_times_literal", "a[i] * 3", "element", I16, I16, I32),
    ("uint8_plus_uint8", "a[i] + b[i]", "element", U8, U8, I32),
    ("uint16_minus_literal", "a[i] - 1", "element", U16, U16, I32),
    ("uint32_times_uint32", "a[i] * b[i]", "local", U32, U32, I32),
    ("int32_plus_int32", "a[i] + b[i]", "local", I32, I32, I32),
    ("uint64_plus_int64", "a[i] + b[i]", "element", U64, I64, I32),
    ("uint64_plus_literal", "a[i] + 1", "element", U64, I64, I32),
    ("int32_over_int32", "a[i] / b[i]", "element", I32, I32, I32),
    ("int64_floor_int32", "a[i] // b[i]", "element", I64, I32, I32),
    ("bool_plus_bool", "(a[i] > 1) + (b[i] > 1)", "element", F32, F32, I32),
    ("bool_times_float32", "(a[i] > 1) * b[i]", "element", F32, F32, I32),
    ("minus_bool", "-(a[i] > 1)", "local", F32, F32, I32),
    ("float16_times_float16", "a[i] * b[i]", "local", F16, F16, I32),
    ("float16_times_a_tenth", "a[i] * 0.1", "element", F16, F16, I32),
    ("float16_plus_literal", "a[i] + 1", "element", F16, F16, I32),
    ("float16_times_float32", "a[i] * b[i]", "element", F16, F32, I32),
    ("float16_over_float16", "a[i] / b[i]", "local", F16, F16, I32),
    ("float32_times_a_tenth", "a[i] * 0.1", "local", F32, F32, I32),
    ("float32_plus_int32", "a[i] + b[i]", "element", F32, I32, I32),
    ("float32_squared", "a[i] ** 2", "element", F32, F32, I32),
    ("exp_float32_in_an_expression", "math.exp(a[i]) * b[i]", "element", F32, F32, I32),
    ("exp_float32_in_a_local", "math.exp(a[i])", "local", F32, F32, I32),
    ("exp_float32_scalar", "math.exp(s)", "local", F32, F32, F32),
    ("exp_int32", "math.exp(a[i])", "element", I32, I32, I32),
    ("sqrt_float16", "math.sqrt(a[i])", "local", F16, F16, I32),
    ("floor_float32", "math.floor(a[i])", "element", F32, F32, I32),
    ("pow_float32_literal", "math.pow(a[i], 2)", "element", F32, F32, I32),
    ("fabs_int32", "math.fabs(a[i])", "element", I32, I32, I32),
    ("float_of_float32", "float(a[i])", "local", F32, F32, I32),
    ("int_of_float16", "int(a[i])", "element", F16, F16, I32),
    ("min_float32_literal", "min(a[i], 0.5)", "local", F32, F32, I32),
    ("accumulated_from_zero", "ACCUMULATE a[i] * b[i]", "local", F32, F32, I32),
    ("range_of_int32", "RANGE s", "element", F32, F32, I32),  # the loop variable: int32
    ("range_of_uint32", "RANGE s", "element", F32, F32, U32),  # uint64
    ("range_of_uint64_per_lane", "RANGE a[i], a[i] + b[i]", "element", U64, U64, I32),  # uint64, bounds per thread
    ("range_of_uint64_and_int64", "RANGE a[i], a[i] + b[i]", "element", U64, I64, I32),  # int64
    ("range_of_float64", "RANGE s", "element", F32, F32, F64),  # int32: numba-cuda converts the float toward zero
    ("range_of_float32_per_lane", "RANGE a[i], a[i] + b[i]", "element", F32, F32, I32),  # int32
    ("range_of_float16_and_float64", "RANGE a[i], b[i], s", "element", F16, F64, F64),  # int32
    ("range_of_int64_and_float64", "RANGE a[i], b[i]", "element", I64, F64, I32),  # int64
    ("range_of_uint64_and_float32", "RANGE a[i], b[i]", "element", U64, F32, I32),  # uint64
    ("range_of_ceil_of_a_quotient", "RANGE math.ceil(a[i] / s)", "element", I32, I32, I32),  # int32: ceil is float64
]
HEADER = "import math\n\nfrom numba import cuda\n"


def kernel_source(name: str, expression: str, stored: str) -> str:
    if expression.startswith("ACCUMULATE "):  # x starts as an int, a loop adds the expression
        body = ["x = 0", "for k in range(3):", f"    x += {expression.split(' ', 1)[1]}", "out[i] = x"]
    elif expression.startswith("RANGE "):  # the variable of a loop over range(...) is stored
        body = [f"for k in range({expression.split(' ', 1)[1]}):", "    out[i] = k"]
    elif stored == "local":
        body = [f"x = {expression}", "out[i] = x"]
    else:
        body = [f"out[i] = {expression}"]
    lines = [f"def {name}(a, b, s, out):", "    i = cuda.grid(1)", "    if i < out.size:"]
    return "\n".join(lines + [" " * 8 + line for line in body]) + "\n"


@pytest.fixture(scope="module")
def typing_kernels(tmp_path_factory):
    """The table's kernels, in a module of their own (the simulator reads a kernel's source)."""
    path = tmp_path_factory.mktemp("typing") / "typing_cases.py"
    path.write_text(HEADER + "\n\n".join(kernel_source(name, expression, stored)
                                         for name, expression, stored, *_ in TYPING))
    spec = importlib.util.spec_from_file_location("typing_cases", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compiled_type(function, argtypes) -> np.dtype:
    """The dtype numba-cuda's compiler gives the value ``out[i] = ...`` stores (its typed IR)."""
    annotation = compile_cuda(function, types.void, argtypes, cc=ptx.COMPUTE_CAPABILITY).type_annotation
    stored = [annotation.typemap[statement.value.name] for block in annotation.blocks.values()
              for statement in block.body if isinstance(statement, (ir.SetItem, ir.StaticSetItem))]
    assert len(stored) == 1, stored
    return np.dtype(str(stored[0]).replace("bool", "bool_"))


@pytest.fixture
def stored_dtypes(monkeypatch):
    """The dtypes of the values the simulator stores into arrays, in order."""
    seen = []
    original = Runtime.store

    def store(self, array, index, value, *args, **kwargs):
        seen.append(dtype_of(value))
        return original(self, array, index, value, *args, **kwargs)

    monkeypatch.setattr(Runtime, "store", store)
    return seen


def operand(dtype, size):
    if np.dtype(dtype).kind == "f":
        return RNG.uniform(0.5, 3, size).astype(dtype)
    return RNG.integers(1, 9, size).astype(dtype)


@pytest.mark.parametrize("name, expression, stored, a_dtype, b_dtype, s_dtype", TYPING, ids=[c[0] for c in TYPING])
def test_the_simulator_types_as_compiled_numba_cuda(typing_kernels, stored_dtypes, monkeypatch, name, expression,
                                                    stored, a_dtype, b_dtype, s_dtype):
    function = getattr(typing_kernels, name)
    a, b, s, out = operand(a_dtype, N), operand(b_dtype, N), np.dtype(s_dtype).type(1.25), np.zeros(N)
    argtypes = (types.Array(from_dtype(a.dtype), 1, "C"), types.Array(from_dtype(b.dtype), 1, "C"),
                from_dtype(np.dtype(s_dtype)), types.Array(types.float64, 1, "C"))
    expected = compiled_type(function, argtypes)
    monkeypatch.setenv(ptx.MODE_ENV, "off")
    with simulated():
        cuda.jit(function)[3, 32](a, b, s, out)
    assert set(stored_dtypes) == {expected}, f"{expression} ({stored}): numba-cuda types it {expected}"
    assert np.isfinite(out).all()


def test_the_table_covers_every_number_type():
    covered = {np.dtype(d) for _, _, _, *dtypes in TYPING for d in dtypes}
    assert covered >= {np.dtype(d) for d in (I8, I16, I32, I64, U8, U16, U32, U64, F16, F32, F64)} - {np.dtype(F64)}


# -- idioms ------------------------------------------------------------------------------------------------
on_the_cpu_backend = pytest.mark.skipif(gpucourse.BACKEND.on_gpu, reason="cuda.device_array is the GPU's there")


def data(n=N, dtype=np.float32, low=-2.0, high=2.0):
    return RNG.uniform(low, high, n).astype(dtype)


@cuda.jit
def accumulate(out, a):
    i = cuda.grid(1)
    if i < out.size:
        for k in range(3):
            out[i] += a[i] * k


@on_the_cpu_backend
def test_accumulating_into_a_fresh_device_array_is_an_uninitialised_read():
    a = data()
    with simulated(), pytest.raises(UninitializedRead, match="device_array"):
        accumulate[3, 32](cuda.device_array(N, np.float32), a)


@on_the_cpu_backend
def test_accumulating_into_a_device_array_zeroed_first_gives_the_sum():
    a = data()
    with simulated():
        zeroed = cuda.device_array(N, np.float32)
        zeroed[:] = 0
        accumulate[3, 32](zeroed, a)
        copied = cuda.to_device(np.zeros(N, np.float32))
        accumulate[3, 32](copied, a)
    expected = np.float32(0) + a * 0 + a * 1 + a * 2
    np.testing.assert_array_equal(zeroed.copy_to_host(), expected)
    np.testing.assert_array_equal(copied.copy_to_host(), expected)


@on_the_cpu_backend
def test_reading_a_device_array_like_before_writing_it_is_an_uninitialised_read():
    a = data()
    with simulated(), pytest.raises(UninitializedRead):
        accumulate[3, 32](cuda.device_array_like(a), a)


@cuda.jit
def scale(out, a, factor):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] * factor


@on_the_cpu_backend
def test_a_device_array_written_by_one_kernel_is_read_by_the_next_and_copied_back():
    a = data()
    with simulated():
        d_a, d_tmp, d_out = cuda.to_device(a), cuda.device_array(N, np.float32), cuda.device_array(N, np.float32)
        scale[3, 32](d_tmp, d_a, np.float32(2))
        scale[3, 32](d_out, d_tmp, np.float32(0.5))
        result = d_out.copy_to_host()
    np.testing.assert_array_equal(result, a * np.float32(2) * np.float32(0.5))


def test_a_host_array_passed_to_a_kernel_is_copied_back():
    a, out = data(), np.full(N, np.nan, np.float32)
    with simulated():
        scale[3, 32](out, a, 3)
    np.testing.assert_array_equal(out, (a * np.float64(3)).astype(np.float32))  # float32 * int64: float64


@cuda.jit
def unguarded(out, a):
    i = cuda.grid(1)
    out[i] = 2 * a[i]


def test_a_kernel_without_its_bounds_check_is_out_of_bounds():
    a = data()
    with simulated(), pytest.raises(OutOfBounds, match="past the end"):
        unguarded[3, 32](np.zeros_like(a), a)


@cuda.jit
def difference(out, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i + 1] - a[i]


def test_a_stencil_reading_its_right_neighbour_at_the_end_is_out_of_bounds():
    a = data()
    with simulated(), pytest.raises(OutOfBounds):
        difference[3, 32](np.zeros_like(a), a)


@cuda.jit
def window_sums(out, a):
    i = cuda.grid(1)
    if i < out.size:
        w, x, y, z = a[i:i + 4]  # numba unpacks a 1-D array, checking its length at run time
        out[i] = w + x + y + z


@cuda.jit
def window_sums_one_short(out, a):
    i = cuda.grid(1)
    if i < out.size:
        x, y, z = a[i:i + 4]
        out[i] = x + y + z


def test_unpacking_a_slice_reads_its_elements_and_a_length_that_differs_is_reported():
    a = data(N + 3)
    out = np.full(N, np.nan, np.float32)
    with simulated():
        window_sums[3, 32](out, a)
    np.testing.assert_array_equal(out, ((a[:-3] + a[1:-2]) + a[2:-1]) + a[3:])  # float32, numba's order
    ptx.compile_for_gpu(window_sums, (types.float32[::1], types.float32[::1]))  # and numba-cuda compiles it
    with simulated(), pytest.raises(OutOfBounds, match=r"unpacks 4 elements of a view of `a` into 3 names"):
        window_sums_one_short[3, 32](np.zeros(N, np.float32), a)


@cuda.jit
def doubled_grid_stride(out, a):
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, out.size, stride):
        out[i] = 2 * a[i]


def test_a_grid_stride_loop_covers_every_element_with_any_grid():
    a = data(1000)
    for blocks, threads in ((1, 32), (3, 64), (40, 128)):
        out = np.full_like(a, np.nan)
        with simulated():
            doubled_grid_stride[blocks, threads](out, a)
        np.testing.assert_array_equal(out, 2 * a)


TILE = 16


@cuda.jit
def tile_counts(out, k):
    i = cuda.grid(1)
    if i < out.size:
        for step in range(math.ceil(k / TILE)):  # math.ceil of a float64 is a float64 in numba-cuda
            out[i] += step + 1


@cuda.jit
def float_bounds(out, starts, stops):
    i = cuda.grid(1)
    if i < out.size:
        for k in range(starts[i], stops[i], 2.9):  # int32 bounds and step: 2.9 is 2
            out[i] = out[i] * 10 + k


def test_range_of_floats_converts_them_toward_zero_as_numba_cuda_does():
    """numba-cuda types ``range`` of floats as ``range(int32)`` and converts each with ``cvt.rzi.s32``."""
    out = np.zeros(N, np.int64)
    with simulated():
        tile_counts[3, 32](out, 40)  # ceil(2.5): 3 steps
    np.testing.assert_array_equal(out, 1 + 2 + 3)
    starts, stops = data(low=-9, high=9, dtype=np.float64), data(low=-9, high=9, dtype=np.float32)
    out = np.zeros(N, np.int64)
    with simulated():
        float_bounds[3, 32](out, starts, stops)
    expected = [sum(k * 10**e for e, k in enumerate(reversed(range(int(a), int(b), 2)))) for a, b in zip(starts, stops)]
    np.testing.assert_array_equal(out, expected)
    compiled = ptx.compile_for_gpu(float_bounds, (types.int64[::1], types.float64[::1], types.float32[::1]))
    assert set(re.findall(r"cvt\.rzi\.\w+\.\w+", compiled)) == {"cvt.rzi.s32.f64", "cvt.rzi.s32.f32"}


@cuda.jit
def by_thread_index_only(out, a):
    i = cuda.threadIdx.x
    if i < out.size:
        out[i] = a[i]


def test_indexing_by_threadidx_alone_with_several_blocks_is_a_race():
    a = data()
    with simulated(), pytest.raises(DataRace):
        by_thread_index_only[3, 32](np.zeros_like(a), a)


@cuda.jit
def summed_without_atomics(total, a):
    i = cuda.grid(1)
    if i < a.size:
        total[0] += a[i]


@cuda.jit
def summed_atomically(total, a):
    i = cuda.grid(1)
    if i < a.size:
        cuda.atomic.add(total, 0, a[i])


def test_a_sum_into_one_element_is_a_race_without_an_atomic_and_exact_with_one():
    a = data(dtype=np.float64).round(2)
    with simulated(), pytest.raises(DataRace):
        summed_without_atomics[3, 32](np.zeros(1), a)
    total = np.zeros(1)
    with simulated():
        summed_atomically[3, 32](total, a)
    assert total[0] == pytest.approx(a.sum(), abs=1e-12)  # the order of the additions differs


@cuda.jit
def histogram(counts, values):
    i = cuda.grid(1)
    if i < values.size:
        cuda.atomic.add(counts, values[i], 1)


def test_an_atomic_histogram_counts_every_value():
    values = RNG.integers(0, 7, 500).astype(np.int32)
    counts = np.zeros(7, np.int32)
    with simulated():
        histogram[4, 128](counts, values)
    np.testing.assert_array_equal(counts, np.bincount(values, minlength=7))


def make_block_sum(barrier: bool):
    @cuda.jit
    def block_sum(out, a):
        tile = cuda.shared.array(32, float32)
        t, i = cuda.threadIdx.x, cuda.grid(1)
        tile[t] = a[i] if i < a.size else 0
        if barrier:
            cuda.syncthreads()
        if t == 0:
            total = 0.0
            for k in range(32):
                total += tile[k]
            out[cuda.blockIdx.x] = total

    return block_sum


def test_a_shared_tile_read_without_a_barrier_is_a_race_and_with_one_the_block_sums():
    a = data()
    with simulated(), pytest.raises(DataRace):
        make_block_sum(barrier=False)[3, 32](np.zeros(3, np.float32), a)
    out = np.zeros(3, np.float32)
    with simulated():
        make_block_sum(barrier=True)[3, 32](out, a)
    padded = np.zeros(96, np.float64)
    padded[:N] = a  # total is a float64 (0.0 plus float32 values), stored as float32
    np.testing.assert_array_equal(out, padded.reshape(3, 32).sum(axis=1, dtype=np.float64).astype(np.float32))


@cuda.jit
def barrier_in_a_branch(out, a):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = a[i]
        cuda.syncthreads()


def test_a_barrier_only_the_threads_in_range_reach_is_divergent():
    a = data()
    with simulated(), pytest.raises(DivergentBarrier):
        barrier_in_a_branch[3, 32](np.zeros_like(a), a)


@cuda.jit
def local_sums(out, a):
    i = cuda.grid(1)
    if i < a.size:
        partial = cuda.local.array(4, float32)
        for k in range(4):
            partial[k] += a[i] * k
        out[i] = partial[3]


def test_a_local_array_added_to_before_it_is_set_is_an_uninitialised_read():
    a = data()
    with simulated(), pytest.raises(UninitializedRead):
        local_sums[3, 32](np.zeros_like(a), a)


@cuda.jit
def exp_sums(out, a):
    i = cuda.grid(1)
    if i < out.size:
        largest = a[i, 0]
        for k in range(1, a.shape[1]):
            largest = max(largest, a[i, k])
        total = 0.0
        for k in range(a.shape[1]):
            total += math.exp(a[i, k] - largest)
        out[i] = total


def test_a_softmax_denominator_takes_exp_in_float32_and_sums_in_float64():
    """``a[i, k] - largest`` is float32, so is its ``math.exp``; ``total`` starts at 0.0: float64."""
    a = data(N * 40).reshape(N, 40)
    out = np.zeros(N)
    with simulated():
        exp_sums[3, 32](out, a)
    terms = np.exp(a - a.max(axis=1, keepdims=True))
    assert terms.dtype == np.float32
    np.testing.assert_array_equal(out, [sum(float(x) for x in row) for row in terms])  # left to right


@cuda.jit
def relu_with_an_integer_zero(out, a):
    i = cuda.grid(1)
    if i < out.size:
        v = a[i] * float32(3)
        if v < 0:
            v = 0  # an integer in one branch: numba-cuda joins the two as a float64, never an integer
        out[i] = v


def test_a_relu_that_sets_an_integer_zero_keeps_the_fraction_of_the_others():
    """``v`` is a float32 and, in a branch, the integer 0: numba-cuda types the variable where they meet as float64
    (its typemap), so the positive values keep their fraction. The simulator took one version's type, here the
    integer's, and truncated them all (2.25 became 2.0): a right kernel graded wrong on a laptop."""
    a = data()
    out = np.full(N, np.nan, np.float32)
    with simulated():
        relu_with_an_integer_zero[3, 32](out, a)
    np.testing.assert_array_equal(out, np.maximum(a * np.float32(3), 0))
    assert (out % 1 != 0).any()


@cuda.jit
def halves(out, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] / 2


def test_integer_division_by_slash_is_float64_and_truncates_when_stored_in_an_int_array():
    a = RNG.integers(-9, 9, N).astype(np.int32)
    out = np.zeros(N, np.int32)
    with simulated():
        halves[3, 32](out, a)
    np.testing.assert_array_equal(out, (a / 2).astype(np.int32))  # -3 / 2 = -1.5, stored as -1
    assert (a % 2 != 0).any() and (a < 0).any()


@cuda.jit
def is_a_tenth(out, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 1 if a[i] == 0.1 else 0


def test_a_float32_compared_with_a_float_literal_is_never_equal():
    a = np.full(N, 0.1, np.float32)
    out = np.full(N, 7, np.int64)
    with simulated():
        is_a_tenth[3, 32](out, a)
    np.testing.assert_array_equal(out, 0)  # float32(0.1) != 0.1 in float64


@cuda.jit
def transposed(out, a):
    row, column = cuda.grid(2)
    if row < a.shape[0] and column < a.shape[1]:
        out[column, row] = a[row, column]


def test_a_2d_grid_over_a_matrix_that_is_not_a_multiple_of_the_block():
    a = data(37 * 53).reshape(37, 53)
    out = np.full((53, 37), np.nan, np.float32)
    with simulated():
        transposed[(3, 4), (16, 16)](out, a)
    np.testing.assert_array_equal(out, a.T)


@cuda.jit
def halve_until_small(out, a):
    i = cuda.grid(1)
    if i < out.size:
        x = a[i]
        while x != 0.5:  # a float rarely lands on 0.5 exactly: the loop never ends
            x = x / 2
        out[i] = x


def test_a_loop_that_never_ends_is_reported():
    a = data(low=1.1, high=3.0)
    with simulated(), step_budget(2000), pytest.raises(EndlessLoop):
        halve_until_small[3, 32](np.zeros_like(a), a)


@cuda.jit
def positive(out, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] > 0


def test_a_comparison_stored_in_a_float_array_is_one_or_zero():
    a = data()
    out = np.full(N, np.nan, np.float32)
    with simulated():
        positive[3, 32](out, a)
    np.testing.assert_array_equal(out, (a > 0).astype(np.float32))


@cuda.jit
def warp_sums(out, a):
    i = cuda.grid(1)
    if i >= a.size:
        return
    v = a[i]
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if cuda.laneid == 0:
        out[i // 32] = v


def test_a_full_mask_shuffle_after_some_lanes_returned_is_a_warp_fault_and_with_all_lanes_sums():
    with simulated(), pytest.raises(WarpFault):
        warp_sums[3, 32](np.zeros(3, np.float32), data())
    a, out = data(96), np.zeros(3, np.float32)
    with simulated():
        warp_sums[3, 32](out, a)
    tree = a.reshape(3, 32).copy()
    for offset in (16, 8, 4, 2, 1):  # lane l adds lane l + offset: a tree in float32
        tree[:, :32 - offset] += tree[:, offset:]
    np.testing.assert_array_equal(out, tree[:, 0])


# -- what numba-cuda refuses, the simulator refuses with the course's message ------------------------------
@on_the_cpu_backend
@pytest.mark.parametrize("use, refused", [
    (lambda d: d[...], "d\\[:\\] instead of d\\[...\\]"),
    (lambda d: d + 1, "no `\\+` on a GPU.*copy_to_host\\(\\) \\+"),
    (lambda d: d < 0, "no `<` on a GPU"),
    (lambda d: d.sum(), "no `sum` on a GPU.*d.copy_to_host\\(\\).sum"),
    (lambda d: d.astype(np.float64), "no `astype` on a GPU"),
], ids=["ellipsis", "arithmetic", "ordering", "sum", "astype"])
def test_a_device_array_refuses_what_numba_s_refuses_on_a_gpu(use, refused):
    d = cuda.to_device(data())
    with pytest.raises((TypeError, AttributeError), match=refused):
        use(d)


@on_the_cpu_backend
def test_a_device_array_keeps_what_numba_s_has_on_a_gpu():
    a = data(12)
    d = cuda.to_device(a)
    assert (d.shape, d.size, d.ndim, d.dtype, d.nbytes, len(d)) == (a.shape, a.size, 1, a.dtype, a.nbytes, 12)
    np.testing.assert_array_equal(d.reshape(3, 4).T.copy_to_host(), a.reshape(3, 4).T)
    np.testing.assert_array_equal(np.asarray(d[2:5]), a[2:5])  # numba's copies to the host
    assert d.is_c_contiguous() and d[::2].copy_to_host().tolist() == a[::2].tolist()
