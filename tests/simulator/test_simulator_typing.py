"""The simulator computes in the types numba-cuda compiles a kernel to (issue 13).

Each expected value is what the compiled kernel computes: numba types Python
float literals float64, widens integer arithmetic to int64, adds booleans as
integers and returns an operand from ``and``/``or``. The PTX check shows the
float64 arithmetic where it matters. Kernels declared with signatures run on
the simulator too, and their PTX check uses the declared types.
"""

import math

import numba
import numpy as np
import pytest
from numba import cuda, float32, float64, int64, void

from gpucourse import simulated
from gpucourse.run import ptx

RNG = np.random.default_rng(13)
N = 300  # over two blocks of 256: lanes differ in their data and some are idle


@pytest.fixture(autouse=True)
def on_the_simulator():
    with simulated():
        yield


def launch(kernel, *args):
    kernel[2, 256](*args)


# -- the table of issue 13, the compiled column --------------------------------------------------------
@cuda.jit
def times_a_tenth(a, out):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = a[i] * 0.1


def test_a_float_literal_makes_float32_arithmetic_float64():
    a = RNG.uniform(-100, 100, N).astype(np.float32)
    out = np.zeros_like(a)
    launch(times_a_tenth, a, out)
    expected = (a.astype(np.float64) * 0.1).astype(np.float32)
    np.testing.assert_array_equal(out, expected)
    assert not np.array_equal(expected, a * np.float32(0.1))  # the data tells the two apart
    float64 = ptx.float_operations(times_a_tenth.py_func)
    if float64 is not None:  # compiled: the GPU multiplies in float64 too
        assert any(op.startswith("mul") for op in float64)


@cuda.jit
def sums_of_rows(a, out):
    i = cuda.grid(1)
    if i < out.size:
        acc = 0.0
        for k in range(a.shape[1]):
            acc += a[i, k]
        out[i] = acc


def test_an_accumulator_started_at_a_float_literal_is_float64():
    a = RNG.uniform(0, 1, (N, 500)).astype(np.float32)
    out = np.zeros(N, np.float64)
    launch(sums_of_rows, a, out)
    expected = [sum(float(x) for x in row) for row in a]  # left to right, in float64
    np.testing.assert_array_equal(out, expected)
    assert not np.array_equal(out, np.cumsum(a, axis=1, dtype=np.float32)[:, -1])


@cuda.jit
def equals_a_tenth(a, out):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = 1 if a[i] == 0.1 else 0


def test_a_float32_compares_with_a_float_literal_in_float64():
    a = RNG.choice(np.float32([0.1, 0.5, 0.25]), N)
    out = np.full(N, 7, np.int64)
    launch(equals_a_tenth, a, out)
    np.testing.assert_array_equal(out, np.zeros(N))  # float32(0.1) != 0.1


@cuda.jit
def add(a, b, out):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = a[i] + b[i]


def test_int32_arithmetic_is_int64():
    a = RNG.integers(2**31 - 1000, 2**31, N, dtype=np.int32)
    b = RNG.integers(0, 2000, N, dtype=np.int32)
    out = np.zeros(N, np.int64)
    launch(add, a, b, out)
    np.testing.assert_array_equal(out, a.astype(np.int64) + b)
    assert (out > 2**31 - 1).any()


@cuda.jit
def minus_one(a, out):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = a[i] - 1


def test_uint32_minus_an_int_literal_is_int64():
    a = RNG.integers(0, 3, N, dtype=np.uint32)
    out = np.zeros(N, np.int64)
    launch(minus_one, a, out)
    np.testing.assert_array_equal(out, a.astype(np.int64) - 1)
    assert (out == -1).any()


@cuda.jit
def and_or(a, b, both, either):
    i = cuda.grid(1)
    if i < a.size:
        both[i] = a[i] and b[i]
        either[i] = a[i] or b[i]


def test_and_and_or_return_an_operand():
    a, b = RNG.integers(0, 4, N), RNG.integers(0, 4, N)
    both, either = np.zeros(N, np.int64), np.zeros(N, np.int64)
    launch(and_or, a, b, both, either)
    np.testing.assert_array_equal(both, np.where(a != 0, b, a))
    np.testing.assert_array_equal(either, np.where(a != 0, a, b))


@cuda.jit
def positives(a, b, out):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = (a[i] > 0) + (b[i] > 0)


def test_booleans_add_as_integers():
    a, b = RNG.uniform(-1, 1, N), RNG.uniform(-1, 1, N)
    out = np.zeros(N, np.int64)
    launch(positives, a, b, out)
    np.testing.assert_array_equal(out, (a > 0).astype(np.int64) + (b > 0))
    assert (out == 2).any()


# -- the rest of numba's typing ------------------------------------------------------------------------
@cuda.jit
def divisions(a, b, quotient, floor, remainder):
    i = cuda.grid(1)
    if i < a.size:
        quotient[i] = a[i] / b[i]
        floor[i] = a[i] // b[i]
        remainder[i] = a[i] % b[i]


def test_division_and_modulo_as_python_does_them():
    a = RNG.integers(-50, 50, N, dtype=np.int32)
    b = RNG.choice(np.int32([-7, -3, 2, 5]), N)
    quotient, floor, remainder = np.zeros(N), np.zeros(N, np.int64), np.zeros(N, np.int64)
    launch(divisions, a, b, quotient, floor, remainder)
    np.testing.assert_array_equal(quotient, a / b.astype(np.float64))
    np.testing.assert_array_equal(floor, [x // y for x, y in zip(a.tolist(), b.tolist())])
    np.testing.assert_array_equal(remainder, [x % y for x, y in zip(a.tolist(), b.tolist())])


@cuda.jit
def thirds(a, out):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = a[i] / 3


def test_float32_over_an_int_literal_is_float64():
    a = RNG.uniform(-1, 1, N).astype(np.float32)
    out = np.zeros(N)
    launch(thirds, a, out)
    np.testing.assert_array_equal(out, a.astype(np.float64) / 3)


@cuda.jit
def overflow(a, out):
    i = cuda.grid(1)
    if i < a.size:
        big = 2**62
        out[i] = big * 4 + a[i] * 2**40 * 2**40


def test_integers_wrap_around_as_int64():
    a = RNG.integers(1, 1000, N)
    out = np.zeros(N, np.int64)
    launch(overflow, a, out)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out, a * np.int64(2**40) * np.int64(2**40))


@cuda.jit
def half_precision(a, b, out, scaled):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = a[i] * b[i] + a[i]
        scaled[i] = a[i] * 0.1


def test_float16_arithmetic_stays_float16_and_a_float_literal_makes_it_float64():
    a = RNG.uniform(-4, 4, N).astype(np.float16)
    b = RNG.uniform(-4, 4, N).astype(np.float16)
    out, scaled = np.zeros_like(a), np.zeros(N, np.float32)
    launch(half_precision, a, b, out, scaled)
    np.testing.assert_array_equal(out, a * b + a)  # each operation rounded to float16
    np.testing.assert_array_equal(scaled, (a.astype(np.float64) * 0.1).astype(np.float32))
    assert not np.array_equal(out, (a.astype(np.float32) * b + a).astype(np.float16))


@cuda.jit
def tenth_or_element(a, out):
    i = cuda.grid(1)
    if i < a.size:
        x = 0.1
        if a[i] > 0:
            x = a[i]
        out[i] = x


def test_a_variable_assigned_in_a_branch_has_numba_s_unified_type():
    a = RNG.uniform(-1, 1, N).astype(np.float32)
    out = np.zeros(N)
    launch(tenth_or_element, a, out)
    np.testing.assert_array_equal(out, np.where(a > 0, a.astype(np.float64), 0.1))


@cuda.jit
def clipped_product(a, b, out):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = min(a[i], 0.5) * b[i]


def test_min_of_a_float32_and_a_float_literal_is_float64():
    a, b = RNG.uniform(0, 1, N).astype(np.float32), RNG.uniform(0, 1, N).astype(np.float32)
    out = np.zeros(N)
    launch(clipped_product, a, b, out)
    np.testing.assert_array_equal(out, np.minimum(a.astype(np.float64), 0.5) * b)


# -- kernels declared with signatures ------------------------------------------------------------------
@cuda.jit("void(float32[:], float32[:])")
def declared_by_string(a, out):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = a[i] * 0.1


@cuda.jit(void(float32[:], float32[:], float32))
def declared_by_types(a, out, factor):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = a[i] * factor


@cuda.jit("float32(float32)", device=True)
def doubled_in_float32(x):
    return x * 2 + 0.1


@cuda.jit(["void(float32[:], float32[:])", "void(float64[:], float64[:])"])
def declared_twice(a, out):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = doubled_in_float32(a[i])


def test_a_kernel_declared_by_a_string_runs_and_is_compiled_for_its_signature():
    a = RNG.uniform(-1, 1, N).astype(np.float32)
    out = np.zeros_like(a)
    launch(declared_by_string, a, out)
    np.testing.assert_array_equal(out, (a.astype(np.float64) * 0.1).astype(np.float32))
    if ptx.mode() != "off" and not ptx.toolchain_problem():
        assert ptx.float_operations(declared_by_string.py_func) is not None


def test_a_scalar_argument_is_converted_to_the_declared_type():
    a = RNG.uniform(-1, 1, N).astype(np.float32)
    out = np.zeros_like(a)
    launch(declared_by_types, a, out, 0.1)
    np.testing.assert_array_equal(out, a * np.float32(0.1))


def test_several_signatures_and_a_declared_device_function_convert_as_on_the_gpu():
    a = RNG.uniform(-1, 1, N)
    out = np.zeros_like(a)
    launch(declared_twice, a, out)  # float64 arrays: the device function still computes in float32
    x = a.astype(np.float32)
    np.testing.assert_array_equal(out, (x.astype(np.float64) * 2 + 0.1).astype(np.float32))
    single = np.zeros(N, np.float32)
    launch(declared_twice, x, single)
    np.testing.assert_array_equal(single, out.astype(np.float32))


def test_arguments_no_declared_signature_takes_are_refused_with_the_signatures():
    a = RNG.uniform(-1, 1, N).astype(np.int32)
    with pytest.raises(TypeError, match=r"declared for arguments .*float32.* cannot be launched with .*int32"):
        launch(declared_by_string, a, a)


def test_declared_kernels_run_without_nvvm_unchecked(monkeypatch):
    monkeypatch.setenv(ptx.MODE_ENV, "auto")
    monkeypatch.setattr(ptx, "toolchain_problem", lambda: "NVVM is not installed")

    @cuda.jit("float32(float32)", device=True)
    def halved(x):
        return x / 2

    @cuda.jit("void(float32[:])")
    def halve(a):
        i = cuda.grid(1)
        if i < a.size:
            a[i] = halved(a[i])

    a = RNG.uniform(-1, 1, N).astype(np.float32)
    expected = (a.astype(np.float64) / 2).astype(np.float32)
    launch(halve, a)
    np.testing.assert_array_equal(a, expected)
    assert ptx.float_operations(halve.py_func) is None  # not compiled: nothing to compile it with


# -- variables: one type over the whole function, from numba's typemap ------------------------------------
@cuda.jit
def product_plus_half(a, b, out):
    i = cuda.grid(1)
    if i < a.size:
        x = a[i]
        for k in range(b.size):
            x = x * b[k]
            x = x + 0.5
        out[i] = x


def product_plus_half_compiled(a, b, out):
    """The same body compiled by numba for the CPU (same typing, no contraction into fma), over all threads."""

    @numba.njit(error_model="numpy")
    def body(a, b, out):
        for i in range(a.size):
            x = a[i]
            for k in range(b.size):
                x = x * b[k]
                x = x + 0.5
            out[i] = x

    body(a, b, out)


def test_a_variable_has_the_type_numba_unifies_over_the_function():
    """numba types ``x`` float64 (the loop assigns it float64 values), so even the first multiply is float64."""
    a = RNG.uniform(-2, 2, N).astype(np.float32)
    b = RNG.uniform(-2, 2, 5).astype(np.float32)
    out, compiled = np.zeros_like(a), np.zeros_like(a)
    launch(product_plus_half, a, b, out)
    product_plus_half_compiled(a, b, compiled)
    float32_only = a * b[0] + np.float32(0.5)
    for k in range(1, b.size):
        float32_only = float32_only * b[k] + np.float32(0.5)
    assert not np.array_equal(compiled, float32_only)  # the data tells the two typings apart
    if ptx.mode() != "off" and not ptx.toolchain_problem():  # the typemap comes from the PTX check
        np.testing.assert_array_equal(out.view(np.int32), compiled.view(np.int32))


@cuda.jit
def root_of_a_sum(c, n, out):
    i = cuda.grid(1)
    if i < c.size:
        v = c[i]  # int16 here, float32 after the loop: numba types v float32
        for k in range(n[i]):
            v = v + float32(0.25)
        out[i] = math.sqrt(abs(v + c[i]))


def test_a_sum_numba_widens_past_its_operation_is_widened():
    """numba computes ``v + c[i]`` as a float32 add but types its result float64 (the union of the int64 and the
    float32 it saw while it still took ``v`` for an int16), so the root is taken in float64: found by the CPU twin's
    fuzzing (tests/simulator/test_simulator_fuzz.py), where the simulator kept the float32."""
    if ptx.mode() == "off" or ptx.toolchain_problem():
        pytest.skip("numba's types come from the PTX check, which does not run here")
    c = RNG.integers(-50, 50, N).astype(np.int16)
    n = RNG.integers(0, 4, N).astype(np.int32)
    out = np.zeros(N)
    launch(root_of_a_sum, c, n, out)
    sums = np.array([np.float32(x) + np.float32(0.25) * k for x, k in zip(c, n)], np.float32)  # exact: quarters
    np.testing.assert_array_equal(out, np.sqrt(np.abs(sums.astype(np.float64) + c)))  # the root in float64


@cuda.jit
def widened_without_an_add(c, d, f, n, out):
    i = cuda.grid(1)
    if i < c.size:
        v = c[i]  # int16 here, float32 after the loop
        for k in range(n[i]):
            v = v + float32(0.25)
        w = v  # assigned once, but numba sees it an int16 first too
        out[i, 0] = math.sqrt(abs(w + c[i]))  # a float32 add typed float64: the root in float64
        out[i, 1] = (-v) * f[i]  # -v: an int64, then a float32, typed float64: the product in float64
        out[i, 2] = math.fabs(v) * f[i]  # fabs of the int16 is a float64: the call's result float64
        out[i, 3] = min(v, d[i]) * f[i]  # min of an int16 and a uint16 is an int32: the call's result float64


def test_a_negation_a_call_and_a_copy_numba_widens_are_widened():
    if ptx.mode() == "off" or ptx.toolchain_problem():
        pytest.skip("numba's types come from the PTX check, which does not run here")
    c = RNG.integers(-50, 50, N).astype(np.int16)
    d = RNG.integers(0, 100, N).astype(np.uint16)
    f = RNG.uniform(-4, 4, N).astype(np.float32)
    n = RNG.integers(0, 4, N).astype(np.int32)
    out = np.zeros((N, 4))
    launch(widened_without_an_add, c, d, f, n, out)
    v = np.array([np.float32(x) + np.float32(0.25) * k for x, k in zip(c, n)], np.float32)  # exact: quarters
    wide, f64 = v.astype(np.float64), f.astype(np.float64)
    expected = np.stack([np.sqrt(np.abs((v + c).astype(np.float64))), -wide * f64, np.abs(wide) * f64,
                         np.minimum(v, d).astype(np.float64) * f64], axis=1)
    np.testing.assert_array_equal(out, expected)
    assert not np.array_equal(out[:, 1], (-v * f).astype(np.float64))  # the data tells float32 products apart


@cuda.jit(device=True)
def root_of_a_walk(p, q):
    r = p
    for k in range(3):
        r = r + float32(0.25)
    return math.sqrt(abs(r + q))  # widened where p is an int16 (r an int16 first), not where p is a float32


@cuda.jit
def walks(c, f, out):
    i = cuda.grid(1)
    if i < c.size:
        out[i, 0] = root_of_a_walk(c[i], c[i])
        out[i, 1] = root_of_a_walk(f[i], c[i])


def test_a_device_function_widens_only_in_the_signature_numba_widens_it_in():
    """The simulator runs a device function with the types of all its signatures (those they agree on): one
    signature's wider result must not reach another's (NumPy takes a missing type, None, for float64)."""
    if ptx.mode() == "off" or ptx.toolchain_problem():
        pytest.skip("numba's types come from the PTX check, which does not run here")
    c = RNG.integers(-50, 50, N).astype(np.int16)
    f = RNG.uniform(-4, 4, N).astype(np.float32)
    out = np.zeros((N, 2))
    launch(walks, c, f, out)
    float32_root = np.sqrt(np.abs(f + np.float32(0.75) + c)).astype(np.float64)
    np.testing.assert_array_equal(out[:, 1], float32_root)


@cuda.jit(device=True)
def count_or_five(p, q):
    if p < min(2, q):
        return q  # a uint64 ...
    return 5  # ... or an int64: numba returns their union, a float64, from both


@cuda.jit
def negated_counts(u, out):
    i = cuda.grid(1)
    if i < u.size:
        out[i] = -count_or_five(abs(0.001), u[i] << 0)


def test_a_device_function_returns_the_type_numba_unifies_over_its_returns():
    """Every lane returns ``q``, a uint64: negated as numba's float64 it is -q, where a uint64 wraps to about 1.8e19
    (found by this session's review; the simulator returned each value in its own type)."""
    if ptx.mode() == "off" or ptx.toolchain_problem():
        pytest.skip("numba's types come from the PTX check, which does not run here")
    u = RNG.integers(1, 1000, N).astype(np.uint32)
    out = np.zeros(N)
    launch(negated_counts, u, out)
    np.testing.assert_array_equal(out, -u.astype(np.float64))


@cuda.jit
def literals_stored(out, flags):
    i = cuda.grid(1)
    if i < out.size:
        scratch = cuda.local.array(2, numba.uint8)
        scratch[0] = -5  # an int64 literal: stored, it keeps its low byte (251), as on a GPU
        scratch[1] = 300
        out[i] = scratch[0] + scratch[1]
        flags[i] = -1


def test_an_integer_literal_out_of_an_arrays_range_wraps_when_stored():
    """NumPy refuses -5 for a uint8 element; numba stores its low byte, in local and in global memory alike."""
    out = np.zeros(N, np.int64)
    flags = np.zeros(N, np.uint8)
    launch(literals_stored, out, flags)
    assert (out == 251 + 44).all() and (flags == 255).all()


@cuda.jit
def reassigned_in_a_branch(f, n, out):
    i = cuda.grid(1)
    if i < f.size:  # lanes past the end do not run it
        v = 0.5  # a float64 version of v ...
        v = f[i] * float32(3)  # ... and a float32 one, which no branch joins with it
        out[i] = n[i] - v  # a uint8 minus a float32: float32


def test_a_variable_keeps_the_type_of_its_version_in_lanes_that_skip_the_assignment():
    """numba types each version of v on its own; the simulator, merging the float32 into lanes that keep the old
    float64, made the whole of v a float64 and the difference a float64's."""
    if ptx.mode() == "off" or ptx.toolchain_problem():
        pytest.skip("numba's types come from the PTX check, which does not run here")
    f = RNG.uniform(-4, 4, N).astype(np.float32)
    n = RNG.integers(0, 255, N).astype(np.uint8)
    out = np.zeros(N)
    launch(reassigned_in_a_branch, f, n, out)  # 512 threads for 300 elements
    np.testing.assert_array_equal(out, (n.astype(np.float32) - f * np.float32(3)).astype(np.float64))


@cuda.jit
def read_around_a_join(f, out, bits):
    i = cuda.grid(1)
    if i < f.size:
        v = f[i] * float32(1.1)  # a float32 version of v ...
        out[i] = v + f[i] * float32(0.3)  # ... read before the join: float32 arithmetic
        if f[i] < 0:
            v = 5  # an int64 version ...
            bits[i] = v & 3  # ... read inside the branch: an integer's bits
        out[i] += v  # after the join: v is a float64


def test_each_read_of_a_variable_sees_the_type_of_the_version_it_reads():
    """numba converts v's versions to the float64 they unify to only where the branch joins them: before that, v is
    a float32 and v + f[i] * 0.3 is rounded to float32; inside the branch v is an integer. The simulator gave v the
    joined float64 everywhere (a float64 sum, 51 of 64 results off) and refused v & 3 as a float's bits."""
    if ptx.mode() == "off" or ptx.toolchain_problem():
        pytest.skip("numba's types come from the PTX check, which does not run here")
    f = RNG.uniform(-4, 4, N).astype(np.float32)
    out, bits = np.zeros(N), np.zeros(N, np.int64)
    launch(read_around_a_join, f, out, bits)
    v = f * np.float32(1.1)
    before = (v + f * np.float32(0.3)).astype(np.float64)
    np.testing.assert_array_equal(out, before + np.where(f < 0, 5.0, v.astype(np.float64)))
    np.testing.assert_array_equal(bits, np.where(f < 0, 1, 0))


def _masked_bits(p, q):
    v = p * float32(1.1)  # a float32 ...
    if p < 0:
        v = q  # ... or q's integer type
        return v & 3
    return v * float32(0.3)


masked_bits = cuda.jit(device=True)(_masked_bits)
masked_bits_inlined = cuda.jit(device=True, inline="always")(_masked_bits)


@cuda.jit
def masked_bits_of_two_types(f, n, c, out):
    i = cuda.grid(1)
    if i < f.size:
        out[i, 0] = masked_bits(f[i], n[i])  # two signatures: v & 3 reads an int64 in one, an int16 in the other
        out[i, 1] = masked_bits(f[i], c[i])


@cuda.jit
def masked_bits_inline(f, n, c, out):
    i = cuda.grid(1)
    if i < f.size:
        out[i, 0] = masked_bits_inlined(f[i], n[i])  # numba copies it here and types it only here
        out[i, 1] = masked_bits_inlined(f[i], c[i])


@pytest.mark.parametrize("kernel", [masked_bits_of_two_types, masked_bits_inline])
def test_a_device_function_has_the_types_of_the_signature_it_is_called_with(kernel):
    """The signatures of a device function type its variables differently (q an int64, or an int16): each call gets
    its own signature's types, not only those all agree on (the simulator took v's merged float32 lanes as a float
    and refused v & 3). An ``inline="always"`` function, which numba types only inside its callers, is typed as
    compiled alone for each call's argument types."""
    if ptx.mode() == "off" or ptx.toolchain_problem():
        pytest.skip("numba's types come from the PTX check, which does not run here")
    f = RNG.uniform(-4, 4, N).astype(np.float32)
    n = RNG.integers(-50, 50, N)
    c, out = n.astype(np.int16), np.zeros((N, 2))
    launch(kernel, f, n, c, out)
    want = np.where(f < 0, n & 3, (f * np.float32(1.1) * np.float32(0.3)).astype(np.float64))
    np.testing.assert_array_equal(out, np.stack([want, want], axis=1))


@cuda.jit
def doubles_a_tuples_first(out, t):
    i = cuda.grid(1)
    if i < out.size:
        v = t[0]
        out[i] = v * 2


def test_a_kernel_launched_with_tuples_of_other_types_keeps_its_own_types():
    """Tuples of floats and of integers are two signatures (their types differ): launched with floats again after
    the integers, the kernel has the floats' types (both were named "None" and the integers' truncated v to 1)."""
    if ptx.mode() == "off" or ptx.toolchain_problem():
        pytest.skip("numba's types come from the PTX check, which does not run here")
    for out, t, want in [(np.zeros(N, np.float32), (1.5, 2.5), 3.0), (np.zeros(N), (1.5, 2.5), 3.0),
                         (np.zeros(N), (1, 2), 2.0), (np.zeros(N), (1.5, 2.5), 3.0)]:
        launch(doubles_a_tuples_first, out, t)
        np.testing.assert_array_equal(out, want)


@cuda.jit
def conditional_products(x1, x2, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i, 0] = (x2[i] if -5 == round(float64(0.5), 0) else x1[i] + x2[i]) * x1[i]  # a test numba cannot fold
        out[i, 1] = (x2[i] if x1[i] > 100 else x1[i] + x2[i]) * x1[i]  # a test of the thread's data
        out[i, 2] = (x2[i] if -5 == 0 else x1[i] + x2[i]) * x1[i]  # literals: numba drops the side never taken
        out[i, 3] = (x2[i] if x1[i] == x1[i] and 0 else x1[i] + x2[i]) * x1[i]  # `and` with a false literal too
        out[i, 4] = (x2[i] if True else x1[i] + x2[i]) * x1[i]


def test_a_conditional_expression_has_both_sides_types_unified_unless_numba_drops_one():
    """``x2 if test else x1 + x2`` of a uint64 and an int64 is a float64 in numba, whichever side a thread takes, so
    that 0 times a negative number is -0.0 (an H200 gave -0.0 for fuzz kernel k292 of 2026-11-30, the simulator 0);
    a test of literals only is folded first, and the side left alone decides the type (an int64 0)."""
    if ptx.mode() == "off" or ptx.toolchain_problem():
        pytest.skip("numba's types come from the PTX check, which does not run here")
    x1 = RNG.integers(-50, 50, N).astype(np.int16)
    x2 = (-x1.astype(np.int64) + RNG.integers(0, 2, N)).astype(np.uint64)  # x1 + x2: 0 or 1
    out = np.full((N, 5), np.nan)
    launch(conditional_products, x1, x2, out)

    @numba.njit
    def on_a_cpu(x1, x2):  # numba's own typing of the same expressions
        return [(x2 if -5 == round(float64(0.5), 0) else x1 + x2) * x1, (x2 if x1 > 100 else x1 + x2) * x1,
                (x2 if -5 == 0 else x1 + x2) * x1, (x2 if x1 == x1 and 0 else x1 + x2) * x1,
                (x2 if True else x1 + x2) * x1]

    want = np.array([[float(v) for v in on_a_cpu(a, b)] for a, b in zip(x1, x2)])
    unified, folded = want[:, :2], want[:, 2:4]
    assert np.signbit(unified[unified == 0]).any() and (folded == 0).any() and not np.signbit(folded[folded == 0]).any()
    np.testing.assert_array_equal(np.signbit(out), np.signbit(want))
    np.testing.assert_array_equal(out, want)


@cuda.jit
def shuffled_conditional(out):
    i = cuda.grid(1)
    v = cuda.shfl_xor_sync(0xFFFFFFFF, int64(1 if round(float64(0.5), -1) > 3.0 else 0), 1)  # a uniform test
    w = cuda.shfl_xor_sync(0xFFFFFFFF, 1 if round(float64(0.5), -1) > 3.0 else 2.5, 1)  # of an int and a float
    if i < out.shape[0]:
        out[i, 0], out[i, 1] = v, w


def test_a_uniform_conditional_expression_is_a_value_per_thread_where_a_shuffle_needs_one():
    """Its sides of one type give that side as it is; of two, the unified value, one per thread (fuzz kernel k543
    of seed 1 shuffled the first and the simulator refused it: it had made a single NumPy value of it)."""
    out = np.full((64, 2), np.nan)
    shuffled_conditional[1, 64](out)
    np.testing.assert_array_equal(out, np.tile([0.0, 2.5], (64, 1)))


@cuda.jit
def powers_and_nested_conditionals(f, u, a, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i, 0] = f[i] ** u[i]  # numba's int_power: past 0x10000, math.pow of the two as floats
        out[i, 1] = (u[i] - 1 if int64(2) > 1 else (a[i] if u[i] > 0 else 2.5)) * u[i]  # the inner side unified too


def test_a_uint64_exponent_past_2_63_and_a_conditional_no_thread_takes_keep_numbas_types():
    """A uint64 exponent of 2**63 or more was read as a negative int64 (2.5 ** (2**64 - 4) gave 39.0625, numba
    inf); and a conditional expression inside the side of another that no thread takes was typed by its first side
    alone (a uint32: the product then an int64, 20 where numba gives -9.2e19). Both found comparing random
    expressions with numba's CPU compile of them (2026-11-30)."""
    f = np.array([2.5, 1.0, -1.0, 0.5, 3.0, 2.0] * 10)
    u = np.array([2**64 - 4, 2**64 - 1, 2**63, 3, 70000, 0] * 10, dtype=np.uint64)
    a = np.arange(60, dtype=np.uint32)
    out = np.full((60, 2), np.nan)
    launch(powers_and_nested_conditionals, f, u, a, out)

    @numba.njit
    def on_a_cpu(f, u, a):
        return f ** u, (u - 1 if int64(2) > 1 else (a if u > 0 else 2.5)) * u

    want = np.array([on_a_cpu(*args) for args in zip(f, u, a)], dtype=np.float64)
    assert np.isinf(want[0, 0]) and want[5, 1] == 0 and np.signbit(want[5, 1])
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(np.signbit(out), np.signbit(want))
