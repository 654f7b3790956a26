"""The CPU backend runs ordinary numba.cuda code: launches, host API, device functions."""

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gpucourse
from gpucourse.kernels.precision import mma_m16n8k8
from gpucourse.run import ptx
from numba import cuda, float32, types, uint64

from kernels_elsewhere import square_plus_one

pytestmark = pytest.mark.skipif(gpucourse.BACKEND.on_gpu, reason="tests the CPU backend")


@cuda.jit
def shifted_squares(out, a):
    """Shared memory, a barrier, and a device function from another module."""
    tile = cuda.shared.array(32, float32)
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    tile[t] = a[i] if i < a.size else float32(0)
    cuda.syncthreads()
    if i < a.size:
        out[i] = square_plus_one(tile[(t + 1) % 32])


def expected_shifted_squares(a):
    padded = np.zeros(((a.size + 31) // 32) * 32, dtype=a.dtype)
    padded[: a.size] = a
    tiles = padded.reshape(-1, 32)
    return (np.roll(tiles, -1, axis=1).ravel()[: a.size] ** 2 + 1).astype(a.dtype)


def test_backend_is_the_simulator_without_gpu():
    assert gpucourse.BACKEND.kind == "simulator"
    assert "CPU simulator" in gpucourse.BACKEND.describe()


def test_launch_with_device_arrays_and_device_functions():
    a = np.random.default_rng(1).uniform(-3, 3, 45).astype(np.float32)
    d_out = cuda.device_array_like(a)
    shifted_squares[2, 32](d_out, cuda.to_device(a))
    cuda.synchronize()
    np.testing.assert_allclose(d_out.copy_to_host(), expected_shifted_squares(a), rtol=1e-6)


def test_launch_on_host_arrays_with_stream():
    a = np.random.default_rng(2).uniform(-3, 3, 40).astype(np.float32)
    out = np.full_like(a, np.nan)
    stream = cuda.stream()
    shifted_squares[2, 32, stream](out, a)
    stream.synchronize()
    np.testing.assert_allclose(out, expected_shifted_squares(a), rtol=1e-6)


class _TorchStream:
    """Another library's stream object, as a GPU launch refuses it (numba's _to_core_stream)."""

    cuda_stream = 12345


def test_a_launch_on_another_librarys_stream_object_is_refused_as_on_a_gpu():
    a = np.ones(40, np.float32)
    with pytest.raises(TypeError, match="Expected a Stream object, ExperimentalStream, GraphBuilder, or 0, got "
                                        "_TorchStream: launch on a numba stream .*cuda.external_stream"):
        shifted_squares[2, 32, _TorchStream()](np.zeros_like(a), a)
    shifted_squares[2, 32, 0](np.zeros_like(a), a)  # 0 and None: the default stream
    shifted_squares[2, 32, None](np.zeros_like(a), a)


@cuda.jit
def reverse_in_dynamic_shared(out, a):
    buffer = cuda.shared.array(0, float32)
    t = cuda.threadIdx.x
    buffer[t] = a[t]
    cuda.syncthreads()
    out[t] = buffer[cuda.blockDim.x - 1 - t]


def test_dynamic_shared_memory():
    a = np.arange(24, dtype=np.float32) * 1.5
    out = np.zeros_like(a)
    reverse_in_dynamic_shared[1, 24, 0, a.nbytes](out, a)
    np.testing.assert_array_equal(out, a[::-1])


def test_events_time_the_simulation(capsys, monkeypatch):
    from gpucourse.run import simulated_device

    monkeypatch.setattr(simulated_device.SimulatedEvent, "_timing_noted", False)
    start, stop = cuda.event(), cuda.event()
    start.record()
    shifted_squares[1, 32](np.zeros(8, np.float32), np.ones(8, np.float32))
    stop.record()
    stop.synchronize()
    assert cuda.event_elapsed_time(start, stop) == start.elapsed_time(stop) > 0
    assert capsys.readouterr().out.count("measure the CPU simulator, not a GPU") == 1  # once, not at every call
    with pytest.raises(RuntimeError, match="record"):
        cuda.event().elapsed_time(stop)
    untimed = cuda.event(timing=False)
    untimed.record()
    with pytest.raises(RuntimeError, match=r"timing=False\) cannot be timed .*CUDA_ERROR_INVALID_HANDLE"):
        start.elapsed_time(untimed)


def test_events_are_reached_only_once_something_waits_for_the_launches_before_them():
    """A launch returns before its kernel ends on a GPU, so the time to a later event can be read only after a
    synchronisation (else CUDA_ERROR_NOT_READY); a launch that copies a NumPy argument back waits by itself."""
    from gpucourse.grading.feedback import COURSE_ERRORS
    from gpucourse.run.simulated_device import EventNotReady

    a = np.random.default_rng(3).uniform(-1, 1, 40).astype(np.float32)
    d_a, d_out = cuda.to_device(a), cuda.device_array(40, np.float32)
    start, end = cuda.event(), cuda.event()

    def timed(wait) -> float:
        start.record()
        shifted_squares[2, 32](d_out, d_a)
        end.record()
        wait()
        return start.elapsed_time(end)

    with pytest.raises(EventNotReady, match=r"CUDA_ERROR_NOT_READY.*end\.synchronize\(\)") as not_ready:
        timed(lambda: None)
    assert isinstance(not_ready.value, COURSE_ERRORS)  # a notebook shows its message, not a traceback
    with pytest.raises(EventNotReady):
        cuda.event_elapsed_time(start, end)
    with pytest.raises(EventNotReady):  # waiting for the earlier event is not enough
        timed(start.synchronize)
    stream = cuda.stream()

    def poll(query):
        while not query():
            pass

    for ignored in (end.query, stream.query):  # asked once while the kernel runs: False, and nothing waited
        with pytest.raises(EventNotReady):
            timed(ignored)
        ignored()  # the answer to come: True
    for wait in (end.synchronize, lambda: poll(end.query), cuda.synchronize, cuda.current_context().synchronize,
                 stream.synchronize, lambda: poll(stream.query), d_out.copy_to_host, lambda: d_out[0],
                 lambda: np.asarray(d_out),
                 lambda: d_out.copy_to_host(stream=stream),  # into pageable memory: done when it returns
                 lambda: d_out.copy_to_host(np.empty(40, np.float32), stream=stream)):
        assert timed(wait) >= 0, wait
    start.record()
    shifted_squares[2, 32](np.zeros(40, np.float32), a)  # copied back at once
    end.record()
    assert start.elapsed_time(end) >= 0
    start.record()
    with stream.auto_synchronize():
        shifted_squares[2, 32, stream](d_out, d_a)
    end.record()
    assert start.elapsed_time(end) >= 0


def test_bad_launch_configuration_is_explained():
    with pytest.raises(ValueError, match="kernel\\[blocks_per_grid, threads_per_block\\]"):
        shifted_squares[32](np.zeros(3, np.float32), np.zeros(3, np.float32))


def test_a_launch_a_gpu_refuses_for_its_sizes_types_is_refused_with_numbas_words():
    """numba's rule for a launch's sizes (whole numbers: not a string, not a NumPy array), as on a GPU; a grid
    computed with ``/`` is told to divide with ``//``."""
    arrays = np.zeros(4, np.float32), np.zeros(4, np.float32)
    for grid, shown in (("1", r"\['1'\]"), (np.array([1]), r"\[array\(\[1\]\)\]")):
        with pytest.raises(TypeError, match=f"griddim must be a sequence of integers, got {shown}$"):
            shifted_squares[grid, 4](*arrays)
    with pytest.raises(TypeError, match=r"griddim must be a sequence of integers, got \[1.0\]: compute sizes with "
                                        r"integer division, such as blocks = \(n \+ threads - 1\) // threads"):
        shifted_squares[4 / 4, 4](*arrays)
    with pytest.raises(TypeError, match=r"blockdim must be a sequence of integers, got \[2, 2.0\]: compute sizes "
                                        "with integer division"):
        shifted_squares[1, (2, 4 / 2)](*arrays)
    with pytest.raises(ValueError, match="holds a NumPy integer, which a GPU refuses"):  # numba lets them through,
        shifted_squares[np.int64(1), np.int32(32)](*arrays)  # cuda.core's LaunchConfig takes Python ints only


@cuda.jit
def appends_to_a_list(out):
    values = [1.0, 2.0]
    out[0] = values[0]


def test_simulator_only_python_is_rejected_with_the_gpu_compilers_reason():
    with pytest.raises(ptx.KernelCompileError, match="would not compile for a real GPU"):
        appends_to_a_list[1, 1](np.zeros(1, np.float32))


@cuda.jit
def copies_an_element(out, w):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = w[i]


@cuda.jit
def sums_a_run_time_sized_shared_array(out):
    partial = cuda.shared.array(cuda.blockDim.x, float32)
    partial[cuda.threadIdx.x] = 1
    out[0] = partial[0]


TILE = 32


@cuda.jit
def pads_a_tile_in_the_call(out):
    tile = cuda.shared.array((TILE, TILE + 1), float32)
    tile[0, cuda.threadIdx.x] = 1
    out[0] = tile[0, 0]


def test_an_array_stored_into_an_element_and_a_shared_array_sized_at_run_time_are_said_in_plain_words():
    with pytest.raises(ptx.KernelCompileError, match="the value stored is an array, not a number: an array indexed "
                                                     "with fewer indices than it has dimensions gives an array"):
        copies_an_element[1, 32](np.zeros(4, np.float32), np.ones((4, 3), np.float32))
    with pytest.raises(ptx.KernelCompileError, match=r"cuda\.shared\.array needs a shape the compiler knows"):
        sums_a_run_time_sized_shared_array[1, 32](np.zeros(1, np.float32))
    with pytest.raises(ptx.KernelCompileError, match=r"arithmetic such as TILE \+ 1 in the call"):
        pads_a_tile_in_the_call[1, 32](np.zeros(1, np.float32))


@cuda.jit
def counts_unsigned_by_a_signed_one(out, x):  # uint64 + int64 is a float64 in numba: not an index
    i = uint64(0)
    while i < x.shape[0]:
        out[i] = x[i]
        i += 1


def test_a_float_index_from_a_uint64_given_a_signed_result_is_said_in_plain_words():
    with pytest.raises(ptx.KernelCompileError, match=r"an index is a float, .* In numba a uint64 variable given a "
                                                     r"signed result becomes a float64 .*i \+= uint64\(1\)"):
        counts_unsigned_by_a_signed_one[1, 1](np.zeros(4, np.float32), np.ones(4, np.float32))


@cuda.jit
def adds_a_string(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = "a" + x[i]


def test_a_call_no_implementation_takes_names_the_types_not_every_implementation_tried():
    """numba lists the implementations of + it tried (28 in numba-cuda 0.30), each with its registered types (some 40 lines, a review
    of 2026-11-30 found it burying the one line that matters): one line says so instead."""
    with pytest.raises(ptx.KernelCompileError) as raised:
        adds_a_string[1, 32](np.zeros(32, np.float32), np.zeros(32, np.float32))
    message = str(raised.value)
    assert ">>> add(Literal[str](a), float32)" in message
    assert re.search(r"\(numba then lists the \d+ implementations it tried: none takes these types\)", message)
    assert "registered cases" not in message and len(message.splitlines()) <= 5


@cuda.jit
def calls_an_undefined_name(out):
    out[0] = floor(out[0])  # noqa: F821 (the point of the test)


def test_a_typing_error_is_numba_cudas_typing_error_too():
    from numba.cuda.core.errors import TypingError

    with pytest.raises(TypingError, match="would not compile for a real GPU") as raised:
        calls_an_undefined_name[1, 1](np.zeros(1, np.float32))
    assert isinstance(raised.value, ptx.KernelCompileError)
    assert "NameError: name 'floor' is not defined" in str(raised.value)


@cuda.jit
def one_short_fragment(d):
    half, zero = types.float16(0), float32(0)
    a = (half, half, half)  # an mma's A fragment holds 4
    d[0] = mma_m16n8k8(a, (half, half), (zero, zero, zero, zero))[0]


def test_an_intrinsics_own_typing_message_is_all_that_is_shown():
    with pytest.raises(ptx.KernelCompileError) as raised:
        one_short_fragment[1, 32](np.zeros(1, np.float32))
    message = str(raised.value)
    assert message.endswith("mma_m16n8k8: a_frag must be a tuple of 4 float16 values (or of 2 uint32 words of two), "
                            "got UniTuple(float16 x 3)")
    assert "candidate" not in message and len(message.splitlines()) == 2


def test_overloads_has_one_entry_per_declared_or_launched_signature():
    """As numba keeps compiled kernels; what only a compiled kernel knows raises the course's message."""
    declared = cuda.jit(["void(int32[:])", "void(float32[:])"])(decrement)
    assert [str(a) for (a,) in declared.overloads] == ["array(int32, 1d, A)", "array(float32, 1d, A)"]
    overload = next(iter(declared.overloads.values()))
    with pytest.raises(NotImplementedError, match="max_cooperative_grid_blocks` is not available on the course"):
        overload.max_cooperative_grid_blocks(256)
    lazy = cuda.jit(decrement)
    for dtype in (np.int64, np.float64, np.int64):
        lazy[1, 4](np.ones(3, dtype))
    assert [str(a) for (a,) in lazy.overloads] == ["array(int64, 1d, C)", "array(float64, 1d, C)"]


def test_unchecked_kernels_lists_kernels_never_launched():
    @cuda.jit
    def never_launched(out):
        out[0] = 1

    namespace = {"never_launched": never_launched, "shifted_squares": shifted_squares}
    shifted_squares[1, 32](np.zeros(8, np.float32), np.ones(8, np.float32))
    assert ptx.unchecked_kernels(namespace) == ["never_launched"]


def test_launches_beyond_gpu_limits_are_refused():
    a = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="2048 threads; a GPU runs at most 1024"):
        shifted_squares[1, 2048](a, a)
    with pytest.raises(ValueError, match="blockDim.z = 65"):
        shifted_squares[1, (1, 1, 65)](a, a)
    assert cuda.get_current_device().MAX_THREADS_PER_BLOCK == 1024


@cuda.jit(launch_bounds=(64, 2))
def bounded_copy(out, a):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = a[i]


def test_a_launch_past_the_kernels_launch_bounds_is_refused_as_on_a_gpu():
    a = np.arange(100, dtype=np.float32)
    out = np.zeros_like(a)
    bounded_copy[2, 64](out, a)
    np.testing.assert_array_equal(out, a)
    with pytest.raises(ValueError, match=r"bounded_copy was compiled with launch_bounds=\(64, 2\): at most 64 threads "
                                         r"per block, and this launch has 128. A GPU refuses it"):
        bounded_copy[1, 128](out, a)


@cuda.jit
def unguarded_copy(out, a):
    i = cuda.grid(1)
    out[i] = a[i]


def test_out_of_bounds_names_the_thread_in_cuda_terms():
    a = np.zeros(5, np.float32)
    with pytest.raises(IndexError) as error:
        unguarded_copy[2, 4](a, a)
    message = str(error.value)
    assert re.search(r"thread threadIdx=\(\d, 0, 0\) of block blockIdx=\(1, 0, 0\): index \d+ is out of bounds", message)
    assert "tid=" not in message


def leading_zeros(out, value):
    out[0] = cuda.clz(value)


def test_a_python_int_too_wide_for_a_declared_int32_wraps_as_in_numba():
    kernel = cuda.jit("void(int32[:], int32)")(leading_zeros)
    out = np.zeros(1, np.int32)
    kernel[1, 1](out, 0xFFFFFFFF)  # -1 as an int32
    assert out[0] == 0
    kernel[1, 1](out, 0x80000000)
    assert out[0] == 0
    kernel[1, 1](out, 1)
    assert out[0] == 31


@cuda.jit
def add_pairs(arrays):
    i = cuda.grid(1)
    if i < arrays[0].size:
        arrays[0][i] = arrays[1][i] + arrays[2][i]


def test_tuples_of_arrays_and_forall_with_no_work():
    a, b = np.arange(40, dtype=np.float32), np.ones(40, np.float32)
    out = np.zeros_like(a)
    add_pairs[2, 32]((out, a, b))
    np.testing.assert_array_equal(out, a + 1)
    add_pairs.forall(0)((out, a, b))  # nothing to do, as in numba
    with pytest.raises(ValueError, match="negative task count"):
        add_pairs.forall(-1)


def decrement(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] -= 1


def test_a_float_or_numpy_bool_for_a_declared_integer_is_refused_as_ctypes_refuses_it_on_a_gpu():
    kernel = cuda.jit("void(int32[:], int32)")(leading_zeros)
    out = np.zeros(1, np.int32)
    for value in (2.0, np.float32(2), np.bool_(True)):
        with pytest.raises(TypeError, match=r"declares value as int32, and a GPU launch refuses the .* pass a whole "
                                            r"number, e.g. int\(value\)"):
            kernel[1, 1](out, value)
    kernel[1, 1](out, np.int64(1))  # whole numbers, NumPy's too, pass
    assert out[0] == 31


def test_one_declared_signature_reads_unsigned_integers_as_signed_as_a_gpu_does():
    """With one signature numba's dispatcher passes arguments unchecked: uint32 memory is read as int32 (and
    float memory would be read as integers: that launch is refused)."""
    kernel = cuda.jit("void(int32[:])")(decrement)
    a = np.random.default_rng(6).integers(0, 2**32, 45, dtype=np.uint32, endpoint=False)
    a[0] = 0
    expected = a - np.uint32(1)  # wraps to 2**32 - 1, as int32 -1 has the same bits
    kernel[2, 32](a)
    np.testing.assert_array_equal(a, expected)
    with pytest.raises(TypeError, match=r"declared for arguments \(array\(int32, 1d, A\)\).*float64"):
        kernel[2, 32](np.zeros(45))
    with pytest.raises(TypeError, match=r"cannot be launched with \(array\(float32, 1d, C\)\)"):
        kernel[2, 32](np.zeros(45, np.float32))
    several = cuda.jit(["void(int32[:])", "void(float32[:])"])(decrement)
    with pytest.raises(TypeError, match="cannot be launched with"):  # a list of signatures is checked
        several[2, 32](np.zeros(45, np.uint32))


def test_specialize_auto_device_and_numba_reduce():
    a = np.random.default_rng(7).uniform(-1, 1, 1000)
    kernel = cuda.jit(decrement).specialize(a)
    kernel[32, 32](a_copy := a.copy())
    np.testing.assert_array_equal(a_copy, a - 1)
    device, copied = cuda.devicearray.auto_device(a)
    assert copied and np.array_equal(device.copy_to_host(), a)
    with pytest.raises(ValueError, match="contiguous"):
        cuda.devicearray.auto_device(a[::2])
    assert cuda.reduce(lambda x, y: x + y)(a) == pytest.approx(a.sum(), rel=1e-12)
    assert cuda.reduce(lambda x, y: max(x, y))(a) == a.max()


def test_a_kernel_built_by_exec_runs_on_numbas_simulator_with_a_warning():
    """numba-cuda's own tests build kernels from strings; the course simulator needs source, so such a kernel
    runs on numba's simulator, and the warning says which checks it goes without."""
    namespace = {}
    exec("def largest(res, a):\n    cuda.atomic.max(res, 0, a[cuda.grid(1)])\n", {"cuda": cuda}, namespace)
    kernel = cuda.jit(namespace["largest"])
    a, res = np.random.default_rng(8).uniform(-1, 1, 64), np.full(1, -np.inf)
    with pytest.warns(UserWarning, match="`largest` has no source code.*numba's simulator.*without its checks"):
        kernel[2, 32](res, a)
    assert res[0] == a.max()


def test_a_kernel_written_in_python_c_runs_on_the_course_simulator():
    """`python -c PROGRAM` keeps no source file, but Linux keeps the program: its kernels get the course
    simulator and its checks (a race is reported); a string exec'd in it still goes to numba's simulator."""
    program = textwrap.dedent("""\
        import warnings
        import gpucourse
        import numpy as np
        from numba import cuda

        @cuda.jit
        def racy(out):
            out[0] = cuda.threadIdx.x

        try:
            racy[1, 32](np.zeros(1))
        except Exception as exc:
            print("course:", type(exc).__name__)
        namespace = {}
        exec("def racy(out):\\n    out[0] = 7\\n", {"cuda": cuda}, namespace)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cuda.jit(namespace["racy"])[1, 1](out := np.zeros(1))
        print("exec:", out[0], "no source code" in str(caught[0].message))
        """)
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "GPUCOURSE_DEVICE": "cpu"})
    assert run.stdout.splitlines() == ["course: DataRace", "exec: 7.0 True"], run.stderr[-2000:]


@pytest.mark.skipif(bool(ptx.toolchain_problem()), reason="needs NVVM and nvJitLink (the course's cu12 or cu13 extra)")
def test_a_block_past_the_register_file_is_refused_as_on_a_gpu():
    from gpucourse.kernels import matmul as mm

    wide = mm.make_register_tiled(256, 128, 8, 8, 8)  # 512 threads of 8 x 8 accumulators: about 150 registers each
    A, B = np.ones((1, 260, 16), np.float32), np.ones((1, 16, 130), np.float32)
    C = np.zeros((1, 260, 130), np.float32)
    with pytest.raises(ValueError, match=r"matmul_register_tiled uses \d+ registers per thread \(sm_75\): a block of "
                                         r"512 threads takes [\d,]+, more than the 65,536 a block may have. A GPU "
                                         r"refuses this launch \(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES\)"):
        wide[(2, 2, 1), (16, 32)](C, A, B)
    fitted = cuda.jit(launch_bounds=(512, 1))(wide.py_func)  # the assembler keeps it at 128 registers
    fitted[(2, 2, 1), (16, 32)](C, A, B)
    np.testing.assert_array_equal(C, A @ B)


@pytest.mark.skipif(bool(ptx.toolchain_problem()), reason="needs NVVM and nvJitLink (the course's cu12 or cu13 extra)")
def test_the_register_check_assembles_a_kernel_once_not_at_every_launch(monkeypatch):
    from gpucourse.run import assembler

    @cuda.jit
    def wide_copy(out, a):
        i = cuda.grid(1)
        if i < a.size:
            out[i] = a[i]

    calls = []
    real = assembler.assembled
    monkeypatch.setattr(assembler, "assembled", lambda *args: calls.append(args) or real(*args))
    a = np.arange(600, dtype=np.float32)
    for _ in range(3):
        out = np.zeros_like(a)
        wide_copy[2, 512](out, a)
        np.testing.assert_array_equal(out, a)
    assert len(calls) == 1
