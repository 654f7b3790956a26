"""Device arrays that remember which of their elements something wrote.

On a GPU, ``cuda.device_array`` (and ``device_array_like``, ``mapped_array``)
hands out memory holding whatever was there before. On the CPU these
allocations are `TrackedDeviceArray`s: numba's simulator arrays with a
``written`` mask (a boolean array of their shape) that the course simulator
consults when a kernel reads them, and updates when a kernel writes them, so
that a read of an element nothing wrote is an ``UninitializedRead``. Copies
from the host (``copy_to_device``, ``to_device(..., to=d)``, ``d[...] = x``)
count as writes; views keep a view of the mask, and the views that cannot
(another dtype, `split`) count as writing the whole array, so that no read
through them is flagged wrongly. ``cuda.to_device`` gives one too, all written.

As numba's device arrays on a GPU, they take only integers and slices as
indices: ``d[...]``, ``d[None]`` or an index array is refused with a message,
and so are what numba's simulator lends them from NumPy and a GPU's lack:
arithmetic and comparisons (``d + 1``, ``d < 0``, ``d == 0``: False on a GPU)
and NumPy's methods (``d.sum()``, ``d.astype(...)``, ``d.fill(0)``). What numba
does otherwise on a GPU they do too: ``reshape`` and ``ravel`` only of a
contiguous array, ``d.T`` only of a 2-D one and as a copy, ``split`` gives a
generator, ``flags`` is a dict, ``copy_to_host`` refuses negative strides,
``d[...] = x`` a non-contiguous ``x`` or one of more dimensions, ``np.asarray(d)``
copies, and ``cuda.to_device(d)`` gives ``d`` itself.

``with counting_copies() as copies:`` counts the copies between host and device
inside it: ``copies.to_device`` (``to_device``, ``copy_to_device`` or ``d[...] =``
from a host array, and each host array a launch is given) and ``copies.to_host``
(``copy_to_host``, and each host array a launch is given, which numba copies
back; ``cuda.In`` only in, ``cuda.Out`` only back), and their bytes
(``copies.bytes_to_device``, ``copies.bytes_to_host``).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
from numba.cuda.cudadrv.devicearray import DeviceNDArray
from numba.cuda.simulator.cudadrv import devicearray as sim_arrays

from . import simulated_device

# what a device array on a GPU has: DeviceNDArray's methods and the attributes its __init__ sets
ON_A_GPU = frozenset(name for name in dir(DeviceNDArray) if not name.startswith("__")) | {
    "shape", "strides", "dtype", "size", "ndim", "alloc_size", "gpu_data", "stream"}


@dataclass(eq=False)  # each counter is itself: two that hold the same counts are not the same one
class Copies:
    """Copies between host and device memory, each a whole array (or the part an assignment names)."""

    to_device: int = 0
    to_host: int = 0
    bytes_to_device: int = 0
    bytes_to_host: int = 0


_counting: list[Copies] = []


@contextlib.contextmanager
def counting_copies():
    """``with counting_copies() as copies:`` counts the copies made inside it (on the simulator)."""
    copies = Copies()
    _counting.append(copies)
    try:
        yield copies
    finally:
        _counting.remove(copies)


def count_copies(to_device: int = 0, to_host: int = 0, nbytes: int = 0) -> None:
    """Count copies of ``nbytes`` each: ``to_device`` of them in, ``to_host`` back."""
    for copies in _counting:
        copies.to_device += to_device
        copies.to_host += to_host
        copies.bytes_to_device += to_device * nbytes
        copies.bytes_to_host += to_host * nbytes


def count_launch_copies(arguments) -> None:
    """Count the copies numba makes for a launch's arguments: each host array in and back (``In``: only in,
    ``Out``: only back, ``InOut``: both), a device array or a number none."""
    from numba.cuda.args import In, InOut, Out  # noqa: PLC0415

    for value in arguments:
        if isinstance(value, In):
            count_copies(to_device=1, nbytes=np.asarray(value.value).nbytes)
        elif isinstance(value, (Out, InOut)):
            count_copies(to_device=int(isinstance(value, InOut)), to_host=1, nbytes=np.asarray(value.value).nbytes)
        elif isinstance(value, np.ndarray):
            count_copies(to_device=1, to_host=1, nbytes=value.nbytes)


def check_index(index) -> None:
    """Refuse, as numba's device arrays on a GPU do, an index other than integers and slices."""
    for part in index if type(index) is tuple else (index,):
        if not isinstance(part, (int, np.integer, slice)) or isinstance(part, (bool, np.bool_)):
            raise TypeError(
                f"a device array takes integers and slices as indices, as on a GPU (numba refuses {part!r} "
                "there): write d[:] instead of d[...], or copy it to the host first (d.copy_to_host())")


def _no_operator(symbol: str):
    def refuse(self, other):
        raise TypeError(
            f"a device array has no `{symbol}` on a GPU (numba's device arrays refuse it there): compute in a "
            f"kernel, or copy it to the host first: d.copy_to_host() {symbol} ...")

    return refuse


def _identity(symbol: str):
    """``==`` or ``!=`` as on a GPU between device arrays (the same array or not); of a number or a host array,
    refused: on a GPU ``d == 0`` is False whatever ``d`` holds."""
    refuse = _no_operator(symbol)

    def compare(self, other):
        if isinstance(other, sim_arrays.FakeCUDAArray) or other is None:
            return (self is other) == (symbol == "==")
        refuse(self, other)

    return compare


def _not_on_a_gpu(what: str, numba_says: str, fix: str) -> NotImplementedError:
    return NotImplementedError(f"{what} on a GPU (numba-cuda: '{numba_says}'): {fix}")


def _contiguous_host(value) -> np.ndarray:
    """``value`` (a number, list or host array) as the host array numba copies to the device, refusing, as
    numba does, one that is not contiguous."""
    value = np.asarray(value)
    sim_arrays.sentry_contiguous(value)
    return value


class TrackedDeviceArray(sim_arrays.FakeCUDAArray):
    """A simulated device array with a ``written`` mask of its shape (False: nothing wrote that element)."""

    def __init__(self, ary: np.ndarray, written: np.ndarray, stream=0):
        super().__init__(ary, stream)
        self.written = written

    def __getattr__(self, name):
        if name in ("__array_interface__", "__array_struct__"):  # NumPy then takes `__array__`: a copy
            raise AttributeError(name)
        if name.startswith("__") or name in ON_A_GPU:
            return super().__getattr__(name)
        raise AttributeError(
            f"a device array has no `{name}` on a GPU (numba's device arrays lack NumPy's methods there): copy it "
            f"to the host first: d.copy_to_host().{name}")

    __add__, __sub__, __mul__ = _no_operator("+"), _no_operator("-"), _no_operator("*")
    __truediv__, __floordiv__, __mod__, __pow__ = (_no_operator("/"), _no_operator("//"), _no_operator("%"),
                                                  _no_operator("**"))
    __lt__, __le__, __gt__, __ge__ = _no_operator("<"), _no_operator("<="), _no_operator(">"), _no_operator(">=")
    __eq__, __ne__ = _identity("=="), _identity("!=")
    __hash__ = object.__hash__

    def __array__(self, dtype=None, copy=None):
        """``np.asarray(d)``: as on a GPU, a copy on the host (never a view of the device array)."""
        if copy is False:
            raise ValueError("`copy=False` is not supported. A copy is always created.")
        simulated_device.synchronize()  # numba's copy_to_host() without a stream
        return np.array(self._ary, dtype)  # not counted: NumPy converts device arrays in device-to-device copies too

    @property
    def flags(self) -> dict:
        """As numba's on a GPU: a dict, ``d.flags["C_CONTIGUOUS"]`` (not ``d.flags.c_contiguous``)."""
        return {"C_CONTIGUOUS": self._ary.flags.c_contiguous, "F_CONTIGUOUS": self._ary.flags.f_contiguous}

    def __getitem__(self, index):
        check_index(index)
        item = self._ary[index]
        if type(item) is not np.ndarray or not np.shares_memory(item, self._ary):
            simulated_device.synchronize()  # an element copied to the host without a stream
            return super().__getitem__(index)
        return TrackedDeviceArray(item, self.written[index], self.stream)

    def _untracked(self, derived):
        """A view the mask cannot follow: from now on the whole array counts as written."""
        self.written[...] = True
        return derived

    def __setitem__(self, index, value):
        check_index(index)
        if not isinstance(value, sim_arrays.FakeCUDAArray):
            host = _contiguous_host(value)
            if host.ndim > np.ndim(self._ary[index]):
                raise ValueError(f"Can't assign {host.ndim}-D array to {np.ndim(self._ary[index])}-D self")
        self._ary[index] = value
        self.written[index] = True
        if isinstance(value, np.ndarray):
            count_copies(to_device=1, nbytes=value.nbytes)

    def transpose(self, axes=None):
        """``d.T``: as on a GPU, of a 2-D array only, and a new array (numba transposes it with a kernel)."""
        if axes and tuple(axes) == tuple(range(self.ndim)):
            return self
        if self.ndim != 2:
            raise _not_on_a_gpu(f"a {self.ndim}-D device array has no transpose", "transposing a non-2D "
                                "DeviceNDArray isn't supported", "transpose it in a kernel, or on the host")
        return TrackedDeviceArray(np.ascontiguousarray(self._ary.T), np.ascontiguousarray(self.written.T),
                                  self.stream)

    def reshape(self, *shape, **options):
        wanted = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        if isinstance(wanted, list) and tuple(wanted) == self.shape:
            raise _not_on_a_gpu("a device array's reshape to its own shape given as a list fails", "operation "
                                "requires copying", f"pass a tuple: d.reshape({tuple(wanted)})")
        if tuple(wanted) != self.shape and not (self._ary.flags.c_contiguous or self._ary.flags.f_contiguous):
            raise _not_on_a_gpu("a device array that is not contiguous cannot be reshaped",
                                "operation requires copying", "reshape the contiguous array it is a view of, or "
                                "copy it first (into a cuda.device_array, by a kernel)")
        data, written = self._ary.reshape(*shape, **options), self.written.reshape(*shape, **options)
        if not np.shares_memory(data, self._ary):
            return sim_arrays.FakeCUDAArray(data, self.stream)
        if not np.shares_memory(written, self.written):
            return self._untracked(sim_arrays.FakeCUDAArray(data, self.stream))
        return TrackedDeviceArray(data, written, self.stream)

    def ravel(self, order="C"):
        flags = self._ary.flags
        if not (order in "CA" and flags.c_contiguous or order in "FA" and flags.f_contiguous):
            raise _not_on_a_gpu(f"a device array that is not {'C-' if order == 'C' else ''}contiguous cannot be "
                                "raveled", "ravel on non-contiguous array", "ravel the contiguous array it is a "
                                "view of, or copy it first (into a cuda.device_array, by a kernel)")
        return self.reshape(-1, order=order)

    def squeeze(self, axis=None, stream=0):
        return TrackedDeviceArray(self._ary.squeeze(axis), self.written.squeeze(axis), stream or self.stream)

    def view(self, dtype):
        return self._untracked(super().view(dtype))

    def split(self, section, stream=0):
        """As on a GPU: a generator of the parts, of a 1-D array of unit stride only."""
        if self.ndim != 1:
            raise ValueError("only support 1d array")
        if self.strides[0] != self.dtype.itemsize:
            raise ValueError("only support unit stride")
        return iter(self._untracked(super().split(section, stream)))

    def bind(self, stream=0):
        return TrackedDeviceArray(self._ary, self.written, stream)

    def copy_to_device(self, ary, stream=0):
        super().copy_to_device(ary, stream)
        self.written[...] = True
        if not isinstance(ary, sim_arrays.FakeCUDAArray):
            count_copies(to_device=1, nbytes=self._ary.nbytes)

    def copy_to_host(self, ary=None, stream=0):
        if any(stride < 0 for stride in self.strides):
            raise _not_on_a_gpu("a device array with negative strides (a view such as d[::-1]) cannot be copied "
                                "to the host", f"D->H copy not implemented for negative strides: {self.strides}",
                                "copy the whole array and reverse it on the host: d.copy_to_host()[::-1]")
        count_copies(to_host=1, nbytes=self._ary.nbytes)
        # A copy waits for every launch before it: without a stream, and with one into pageable memory (CUDA returns
        # once it is done). Only a copy with a stream into pinned memory returns at once, which the simulator does not
        # tell apart (its pinned arrays are NumPy's): it counts every copy as a wait, never refusing a right program.
        simulated_device.synchronize()
        return super().copy_to_host(ary, stream)


def to_device(obj, stream=0, copy=True, to=None):
    """``cuda.to_device``: a copy of ``obj`` on the device (all written), or ``obj`` copied into ``to``; a device
    array itself, as on a GPU (no copy)."""
    if to is not None:
        to.copy_to_device(obj, stream)
        return to
    if isinstance(obj, sim_arrays.FakeCUDAArray):
        return obj
    array = sim_arrays.to_device(obj, stream, copy)
    count_copies(to_device=int(copy), nbytes=array._ary.nbytes)
    return TrackedDeviceArray(array._ary, np.ones(array._ary.shape, bool), array.stream)


def device_array(*args, **kwargs) -> TrackedDeviceArray:
    """``cuda.device_array``: an allocation nothing has written yet."""
    array = sim_arrays.device_array(*args, **kwargs)
    return TrackedDeviceArray(array._ary, np.zeros(array._ary.shape, bool), array.stream)


def device_array_like(ary, stream=0) -> TrackedDeviceArray:
    """``cuda.device_array_like``: an allocation of ``ary``'s shape and dtype, nothing copied."""
    array = sim_arrays.device_array_like(ary, stream)
    return TrackedDeviceArray(array._ary, np.zeros(array._ary.shape, bool), stream)


def mapped_array(*args, **kwargs) -> TrackedDeviceArray:
    """``cuda.mapped_array``: host memory the device can read, as uninitialised as ``device_array``'s."""
    for ignored in ("portable", "wc"):
        kwargs.pop(ignored, None)
    return device_array(*args, **kwargs)
