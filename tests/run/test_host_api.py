"""numba.cuda's host API without a GPU: device and context queries, streams, device arrays indexed as numba's
are, arguments a kernel's launch configuration says not to copy back, and a course message for the rest."""

import numpy as np
import pytest
from numba import cuda
from numba.cuda.args import wrap_arg
from numba.cuda.testing import cc_X_or_above

import gpucourse
from gpucourse.run.simulated_device import NotOnTheSimulator

pytestmark = pytest.mark.skipif(gpucourse.BACKEND.on_gpu, reason="tests the CPU backend")


def test_device_and_context_queries():
    device = cuda.get_current_device()
    assert device.compute_capability == (7, 5) == cuda.current_context().device.compute_capability
    assert cc_X_or_above(7, 5) and not cc_X_or_above(8, 0)  # numba's test helpers ask the context
    assert len(cuda.gpus) == 1 and cuda.gpus[0] is cuda.gpus.current is cuda.current_context()
    assert list(cuda.list_devices()) == [cuda.current_context()]
    free, total = cuda.current_context().get_memory_info()
    assert 0 < free <= total
    assert cuda.select_device(0) is device and cuda.is_float16_supported()
    with pytest.raises(ValueError, match="one device"):
        cuda.select_device(1)


def test_what_the_simulator_does_not_cover_is_named():
    with pytest.raises(NotOnTheSimulator, match=r"`cuda.get_current_device\(\).NO_SUCH_ATTRIBUTE` is not available"):
        cuda.get_current_device().NO_SUCH_ATTRIBUTE
    with pytest.raises(NotOnTheSimulator, match="`cuda.external_stream`"):
        cuda.external_stream(0)


@cuda.jit
def scaled(out, a, factor):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] * factor


def test_streams_events_and_copies():
    a = np.random.default_rng(2).uniform(-1, 1, 77).astype(np.float32)
    stream = cuda.stream()
    called = []
    with stream.auto_synchronize():
        d_a = cuda.to_device(a, stream=stream)
        d_out = cuda.device_array_like(d_a, stream=stream)
        scaled[3, 32, stream](d_out, d_a, np.float32(3))
        stream.add_callback(lambda s, status, arg: called.append(arg), "done")
    event = cuda.event()
    event.record(stream)
    event.synchronize()
    assert stream.query() and event.query() and called == ["done"]
    np.testing.assert_array_equal(d_out.copy_to_host(stream=stream), a * np.float32(3))
    again = cuda.device_array(77, np.float32)
    assert cuda.to_device(a, to=again) is again
    np.testing.assert_array_equal(again.copy_to_host(), a)


@pytest.mark.parametrize("index", [Ellipsis, None, (0, Ellipsis), [0, 1], np.array([1, 2]), True])
def test_device_arrays_take_integers_and_slices_only(index):
    d = cuda.to_device(np.arange(12.0).reshape(3, 4))
    assert d[1, 2] == 6.0 and d[1:, ::2].copy_to_host().tolist() == [[4.0, 6.0], [8.0, 10.0]]
    with pytest.raises(TypeError, match=r"integers and slices as indices, as on a GPU"):
        d[index]
    with pytest.raises(TypeError, match=r"write d\[:\] instead of d\[\.\.\.\]"):
        d[index] = 0.0


@pytest.mark.parametrize("use, refused, said", [
    (lambda d: d[:, ::2].reshape(6), NotImplementedError, "operation requires copying"),
    (lambda d: d[:, ::2].ravel(), NotImplementedError, "ravel on non-contiguous array"),
    (lambda d: d.reshape([3, 4]), NotImplementedError, r"pass a tuple: d.reshape\(\(3, 4\)\)"),
    (lambda d: d[0].T, NotImplementedError, "transposing a non-2D DeviceNDArray"),
    (lambda d: d.split(2), ValueError, "only support 1d array"),
    (lambda d: d.flags.c_contiguous, AttributeError, "'dict' object has no attribute"),
    (lambda d: d[0, ::-1].copy_to_host(), NotImplementedError, "negative strides"),
    (lambda d: d == 0, TypeError, "has no `==` on a GPU"),
    (lambda d: d.__setitem__(0, np.arange(8.0)[::2]), ValueError, "non-contiguous buffer"),
    (lambda d: d.__setitem__(0, np.ones((1, 4))), ValueError, "Can't assign 2-D array to 1-D self"),
])
def test_device_arrays_refuse_what_numba_refuses_on_a_gpu(use, refused, said):
    """Each refused as numba-cuda 0.30's DeviceNDArray refuses it (its words in the message)."""
    with pytest.raises(refused, match=said):
        use(cuda.to_device(np.arange(12.0).reshape(3, 4)))


def test_device_arrays_behave_as_numbas_on_a_gpu():
    d = cuda.to_device(np.arange(12.0).reshape(3, 4))
    transposed = d.T  # a copy, made by a kernel on a GPU
    transposed[0, 0] = -1.0
    assert transposed.shape == (4, 3) and d[0, 0] == 0.0
    host = np.asarray(d)  # a copy too
    host[0, 0] = -1.0
    assert d[0, 0] == 0.0 and cuda.to_device(d) is d
    assert d.flags == {"C_CONTIGUOUS": True, "F_CONTIGUOUS": False} and d == d and d != cuda.to_device(host)
    parts = cuda.to_device(np.arange(5.0)).split(2)
    assert not isinstance(parts, list) and [p.copy_to_host().tolist() for p in parts] == [[0, 1], [2, 3], [4]]
    assert d[:, 1:].reshape(3, 3).shape == (3, 3)  # its own shape: nothing to copy
    assert d.reshape(4, 3).ravel().copy_to_host().tolist() == list(range(12))


@pytest.mark.parametrize("grid, block", [(np.int64(2), 32), (2, np.int32(32)), ((2, np.int64(1)), (32,))])
def test_launch_sizes_are_python_integers(grid, block):
    out = cuda.device_array(77, np.float32)
    with pytest.raises(ValueError, match=r"NumPy integer, which a GPU refuses .*convert it with int\(\)"):
        scaled[grid, block](out, cuda.to_device(np.ones(77, np.float32)), np.float32(2))
    with pytest.raises(ValueError, match="NumPy integer"):
        scaled.forall(np.int64(77))(out, cuda.to_device(np.ones(77, np.float32)), np.float32(2))


class DefaultIn:
    """A kernel extension that passes every argument as ``cuda.In`` (numba-cuda's own test does so)."""

    def prepare_args(self, ty, val, **kwargs):
        return ty, wrap_arg(val, default=cuda.In)


def set_first_to_three(a):
    a[0] = 3


def set_field_to_three(records):
    records[0]["b"] = 3


@pytest.mark.parametrize("kernel, dtype", [(set_first_to_three, np.int64),
                                           (set_field_to_three, np.dtype([("b", np.int32)], align=True))])
def test_launch_configuration_decides_what_is_copied_back(kernel, dtype):
    copied, kept = np.zeros(1, dtype), np.zeros(1, dtype)
    cuda.jit(kernel)[1, 1](copied)
    no_copy = cuda.jit(kernel)
    no_copy.extensions.append(DefaultIn())
    no_copy[1, 1](kept)
    assert copied.view(np.int32)[0] == 3 and not kept.view(np.int32).any()


@cuda.jit
def add_to_shared_total(total, a):
    s = cuda.shared.array(1, np.float64)
    if cuda.threadIdx.x == 0:
        s[0] = 0.0
    cuda.syncthreads()
    cuda.atomic.add(s, 0, a[cuda.threadIdx.x])
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        total[0] = s[0]


def test_inspect_asm_gives_the_ptx_of_the_launched_signatures():
    total, a = np.zeros(1), np.arange(32.0)
    add_to_shared_total[1, 32](total, a)
    assert total[0] == a.sum()
    (signature, text), = add_to_shared_total.inspect_asm().items()
    assert "atom.shared.add.f64" in text and ".target sm_75" in text
    assert "atom.shared.add.f64" in add_to_shared_total.inspect_asm(signature)  # compiled again: another name
