"""Device functions between an element's index and its position in storage.

``shape`` and ``strides`` are tuples (passed by value with the launch, so a
kernel is compiled for each number of dimensions); ``index`` is a local array.
"""

from numba import cuda


@cuda.jit(device=True)
def to_index(ordinal, shape, index):
    """Fill ``index`` with the row-major index of element number ``ordinal`` of ``shape``.

    The first dimension needs no remainder (``ordinal`` is below the element count), so a
    1-D tensor costs no division at all.
    """
    for k in range(len(shape) - 1, 0, -1):
        index[k] = ordinal % shape[k]
        ordinal //= shape[k]
    index[0] = ordinal


@cuda.jit(device=True)
def to_position(index, strides):
    """Where element ``index`` lives: the sum of index times stride."""
    position = 0
    for k in range(len(strides)):
        position += index[k] * strides[k]
    return position


@cuda.jit(device=True)
def element_count(shape):
    count = 1
    for k in range(len(shape)):
        count *= shape[k]
    return count
