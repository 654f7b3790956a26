"""Tensors as the kernels of module 2 see them: storage, shape and strides.

A `Tensor` is a flat 1-D ``storage`` array plus a ``shape`` and ``strides``
counted in elements: element ``index`` lives at ``offset + sum(index[k] *
strides[k])``. Transposing, permuting and slicing make views (new shape,
strides and offset, same storage); broadcasting gives a dimension stride 0, so
every index along it reads the same element.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_DIMS = 4


def contiguous_strides(shape) -> tuple[int, ...]:
    """Row-major strides of ``shape``, in elements: the last dimension moves fastest."""
    strides, step = [], 1
    for size in reversed(tuple(shape)):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def broadcast_shape(*shapes) -> tuple[int, ...]:
    """NumPy's broadcasting rule: align on the right, sizes equal or 1."""
    rank = max(len(s) for s in shapes)
    result = []
    for k in range(rank):
        sizes = {s[k - rank + len(s)] for s in shapes if k - rank + len(s) >= 0} - {1}
        if len(sizes) > 1:
            raise ValueError(f"shapes {', '.join(map(str, shapes))} do not broadcast: sizes {sorted(sizes)} on one axis")
        result.append(sizes.pop() if sizes else 1)
    return tuple(result)


def coalesce(shape, *strides) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """Merge the dimensions that every tensor walks as one, and drop size-1 ones.

    Dimensions ``k`` and ``k + 1`` merge when, in every tensor, stepping once along ``k`` is
    stepping ``shape[k + 1]`` times along ``k + 1``. Contiguous tensors of any shape become
    1-D, so a kernel computes one index instead of several (PyTorch's TensorIterator does this).
    """
    if not shape:  # a 0-d tensor: one element
        return (1,), [(0,) for _ in strides]
    kept = [k for k, size in enumerate(shape) if size != 1] or [len(shape) - 1]
    new_shape = [shape[k] for k in kept]
    new_strides = [[s[k] for k in kept] for s in strides]
    k = len(new_shape) - 2
    while k >= 0:
        if all(s[k] == s[k + 1] * new_shape[k + 1] for s in new_strides):
            new_shape[k:k + 2] = [new_shape[k] * new_shape[k + 1]]
            for s in new_strides:
                s[k:k + 2] = [s[k + 1]]
        k -= 1
    return tuple(new_shape), [tuple(s) for s in new_strides]


@dataclass(frozen=True)
class Tensor:
    storage: np.ndarray
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0

    @classmethod
    def from_numpy(cls, array) -> "Tensor":
        """A contiguous copy of ``array`` as storage, shape and strides."""
        array = np.ascontiguousarray(array)
        if array.ndim > MAX_DIMS:
            raise ValueError(f"the course's tensors have at most {MAX_DIMS} dimensions, not {array.ndim}")
        return cls(array.reshape(-1), array.shape, contiguous_strides(array.shape))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def position(self, index) -> int:
        """Where element ``index`` lives in storage."""
        index = tuple(index)
        if len(index) != self.ndim or not all(0 <= i < size for i, size in zip(index, self.shape)):
            raise IndexError(f"index {index} is not an element of a tensor of shape {self.shape}: give one index "
                             "per dimension, each from 0 to its size - 1")
        return self.offset + sum(i * s for i, s in zip(index, self.strides))

    def permute(self, *order) -> "Tensor":
        """A view with the dimensions in ``order``: ``permute(1, 0)``, or ``permute([1, 0])`` as PyTorch takes it."""
        if len(order) == 1 and isinstance(order[0], (tuple, list)):
            order = tuple(order[0])
        if sorted(order) != list(range(self.ndim)):
            raise ValueError(f"permute needs each of the {self.ndim} dimensions once, got {order}")
        return Tensor(self.storage, tuple(self.shape[k] for k in order), tuple(self.strides[k] for k in order),
                      self.offset)

    @property
    def T(self) -> "Tensor":
        return self.permute(*reversed(range(self.ndim)))

    def narrow(self, dim: int, start: int, length: int) -> "Tensor":
        """Elements ``start .. start + length - 1`` along ``dim`` (a view)."""
        if not 0 <= start <= start + length <= self.shape[dim]:
            raise ValueError(f"narrow({dim}, {start}, {length}) is outside dimension {dim} of size {self.shape[dim]}")
        shape = self.shape[:dim] + (length,) + self.shape[dim + 1:]
        return Tensor(self.storage, shape, self.strides, self.offset + start * self.strides[dim])

    def broadcast_to(self, shape) -> "Tensor":
        """A view of shape ``shape``: new and size-1 dimensions get stride 0."""
        shape = tuple(shape)
        if broadcast_shape(self.shape, shape) != shape:
            raise ValueError(f"a tensor of shape {self.shape} cannot broadcast to {shape}")
        pad = len(shape) - self.ndim
        strides = [0] * pad + [0 if size == 1 else stride for size, stride in zip(self.shape, self.strides)]
        return Tensor(self.storage, shape, tuple(strides), self.offset)

    def numpy(self) -> np.ndarray:
        """The tensor's elements as a NumPy view of the same storage."""
        item = self.storage.itemsize
        return np.lib.stride_tricks.as_strided(
            self.storage[self.offset:], self.shape, tuple(s * item for s in self.strides), writeable=False
        )

    def to_device(self) -> "Tensor":
        """The same view with its storage copied to the GPU once: launches on it then copy no data."""
        from numba import cuda  # noqa: PLC0415 - the rest of Tensor needs no GPU

        return Tensor(cuda.to_device(self.storage), self.shape, self.strides, self.offset)

    def kernel_arguments(self) -> tuple[np.ndarray, tuple, tuple]:
        """(storage from the first element, shape, strides) as a kernel takes them: an array and two tuples."""
        return self.storage[self.offset:], self.shape, self.strides
