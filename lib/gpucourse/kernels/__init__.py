"""Reference kernels the lectures teach and later modules reuse, one module per course topic, and `Tensor`.

Holds: `tensor` and `indexing` (strided tensors), `elementwise`, `reduction` and `axis_reduction`
(module 2), `matmul` and its top rung `sgemm` (module 3), `conv` (module 4), `fusion` (module 5),
`precision` (module 6), `vector` (16-byte loads and stores, which several of them use) and `bounds` (their
launch bounds).
May import: numba and numpy (nothing of gpucourse outside this wing).
"""

from . import axis_reduction, bounds, conv, elementwise, fusion, indexing, matmul, precision, reduction, sgemm, vector
from .indexing import element_count, to_index, to_position
from .tensor import MAX_DIMS, Tensor, broadcast_shape, coalesce, contiguous_strides

__all__ = ["Tensor", "MAX_DIMS", "broadcast_shape", "coalesce", "contiguous_strides", "element_count", "to_index", "to_position",
           "indexing", "elementwise", "reduction", "axis_reduction", "matmul", "sgemm", "conv", "fusion", "precision",
           "vector", "bounds"]
