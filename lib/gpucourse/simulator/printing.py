"""``print`` in a simulated kernel: one line per thread that runs it, in numba-cuda's printf formats.

numba-cuda compiles ``print(a, b)`` to one ``vprintf`` per thread, each item in a C format
(``printimpl``): integers ``%lld`` (unsigned ``%llu``), floats of every width ``%f`` (``34.750000``),
booleans ``True``/``False``, string constants, tuples as Python writes them, ``cuda.threadIdx`` and
its kin as ``(x, y, z)``. A GPU interleaves the threads' lines in no set order; here they come in
thread order. Over 32 items, vprintf's limit, the GPU prints the format string itself (numba-cuda's
warning comes from the PTX check, which compiles the kernel).
"""

from __future__ import annotations

import numpy as np

from . import bfloat16
from .errors import UnsupportedInKernel, fault
from .intrinsics import _Dim3
from .memory import SimArray, SimView
from .runtime import UNDEFINED

MAX_ITEMS = 32  # CUDA's vprintf formats at most 32 arguments
PRINTABLE = ("numbers, booleans, string constants, tuples of them and cuda.threadIdx, cuda.blockIdx, "
             "cuda.blockDim, cuda.gridDim")


def kernel_print(runtime, args, kwargs) -> None:
    """``print(*args)`` by every active lane of the launch, in lane order."""
    where = runtime.where(runtime.site)
    if kwargs:
        raise fault(UnsupportedInKernel, where, f"print() in a kernel takes no keyword arguments "
                    f"(got {', '.join(kwargs)}); numba-cuda rejects them: print the values alone")
    lines = []
    for lane in runtime.active_lanes():
        formats, texts = zip(*(_item(value, int(lane), where) for value in args)) if args else ((), ())
        lines.append(" ".join(formats if len(args) > MAX_ITEMS else texts))
    if lines:
        print("\n".join(lines), flush=True)


def _item(value, lane: int, where: str) -> tuple[str, str]:
    """(numba-cuda's printf format, the text the GPU prints) of one item of a print, in one lane."""
    if isinstance(value, _Dim3):
        return "(%d, %d, %d)", "({}, {}, {})".format(*(_at(getattr(value, c), lane) for c in "xyz"))
    if isinstance(value, tuple):
        items = [_item(v, lane, where) for v in value]
        shape = "({},)" if len(items) == 1 else "({})"
        return shape.format(", ".join(f for f, _ in items)), shape.format(", ".join(t for _, t in items))
    if isinstance(value, str):
        return "%s", value
    value = _at(value, lane)
    if isinstance(value, (bool, np.bool_)):
        return "%s", str(bool(value))
    if isinstance(value, (int, np.integer)):
        return "%llu" if isinstance(value, np.unsignedinteger) else "%lld", str(int(value))
    if isinstance(value, (float, np.floating)) or (
            bfloat16.BFLOAT16 is not None and np.asarray(value).dtype == bfloat16.BFLOAT16):
        return "%f", "%f" % float(value)
    if value is UNDEFINED:
        raise fault(UnsupportedInKernel, where, "a variable is used before it is assigned")
    what = "an array" if isinstance(value, (SimArray, SimView)) else f"a {type(value).__name__}"
    raise fault(UnsupportedInKernel, where, f"print() in a kernel prints {PRINTABLE}; numba-cuda cannot print "
                f"{what}: print its elements one by one")


def _at(value, lane: int):
    """A value as lane ``lane`` sees it (a lane array holds one value per lane)."""
    if type(value) is np.ndarray:
        return value[lane] if value.ndim else value[()]
    return value


__all__ = ["kernel_print"]
