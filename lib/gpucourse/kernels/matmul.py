"""Matrix multiplication from naive to register-tiled: ``C[b] = A[b] @ B[b]``, float32.

Every kernel takes ``(C, A, B)`` with 3-D arrays: ``A`` is (batch or 1, M, K), ``B``
is (batch or 1, K, N), ``C`` is (batch, M, N); a batch of 1 in ``A`` or ``B`` is
broadcast over ``C``'s batch. Any M, N, K (not multiples of a tile), one grid
layer per batch element (``blockIdx.z``). `launch` picks the grid; `matmul`
also takes 2-D matrices.

1. `matmul_naive`: one thread per element of C, ``threadIdx.x`` along the rows
   of C: a warp (two columns of a 16 x 16 block) reads 16 different rows of A
   (16 sectors) and writes down columns of C.
2. `matmul_coalesced`: the same with ``threadIdx.x`` along the columns: a warp
   reads one element of A (a broadcast) and 32 neighbours in a row of B.
3. `matmul_tiled`: a block loads ``TILE x TILE`` tiles of A and B into shared
   memory, one element per thread, and every thread reads them ``TILE`` times:
   each element of A is read from global memory ``N / TILE`` times, not ``N``.
4. `matmul_register_tiled`: a block computes a ``BM x BN`` tile of C with
   ``(BM / TM) x (BN / TN)`` threads, each thread a ``TM x TN`` micro-tile held
   in registers (rows ``ty, ty + 16, ...``, columns ``tx, tx + 16, ...``); per
   step of ``k`` a thread reads ``TM + TN`` values from shared memory for
   ``TM * TN`` multiply-adds.
5. `matmul_warp_tiled` (`kernels.sgemm`): the top rung, after Boehm and CUTLASS:
   transposed A tile, 16-byte loads, double buffering, warp tiles; tile sizes
   are the parameters of `sgemm.make_warp_tiled`.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32

from . import sgemm
from .sgemm import matmul_warp_tiled

TILE = 16

BM, BN, BK = 64, 64, 16  # register tiling: the block's tile of C, and its step along K
TM, TN = 4, 4  # each thread's micro-tile of C
THREADS_M, THREADS_N = BM // TM, BN // TN  # a block of 16 x 16 threads


@cuda.jit(device=True)
def batch_of(M, z):
    """The batch element of ``M`` that output layer ``z`` uses (0 when ``M`` has a batch of 1)."""
    return z if M.shape[0] > 1 else 0


@cuda.jit
def matmul_naive(C, A, B):
    row, col = cuda.grid(2)  # x along the rows of C
    z = cuda.blockIdx.z
    if row < C.shape[1] and col < C.shape[2]:
        a, b = batch_of(A, z), batch_of(B, z)
        acc = float32(0)
        for k in range(A.shape[2]):
            acc += A[a, row, k] * B[b, k, col]
        C[z, row, col] = acc


@cuda.jit
def matmul_coalesced(C, A, B):
    col, row = cuda.grid(2)  # x along the columns of C
    z = cuda.blockIdx.z
    if row < C.shape[1] and col < C.shape[2]:
        a, b = batch_of(A, z), batch_of(B, z)
        acc = float32(0)
        for k in range(A.shape[2]):
            acc += A[a, row, k] * B[b, k, col]
        C[z, row, col] = acc


@cuda.jit
def matmul_tiled(C, A, B):
    tile_a = cuda.shared.array((TILE, TILE), float32)
    tile_b = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    z = cuda.blockIdx.z
    a, b = batch_of(A, z), batch_of(B, z)
    K = A.shape[2]
    acc = float32(0)
    for start in range(0, K, TILE):
        # each thread copies one element of each tile; zeros past the edges
        k = start + tx
        tile_a[ty, tx] = A[a, row, k] if row < A.shape[1] and k < K else float32(0)
        k = start + ty
        tile_b[ty, tx] = B[b, k, col] if k < K and col < B.shape[2] else float32(0)
        cuda.syncthreads()  # the tiles are complete
        for j in range(TILE):
            acc += tile_a[ty, j] * tile_b[j, tx]
        cuda.syncthreads()  # everyone is done with them before the next copy
    if row < C.shape[1] and col < C.shape[2]:
        C[z, row, col] = acc


def make_register_tiled(BM: int, BN: int, TM: int, TN: int, BK: int = 16):
    """`matmul_register_tiled` for another shape: ``BM x BN`` tiles of C in steps of ``BK``, ``TM x TN`` per thread.

    Lecture 3 compiles a few shapes to read their registers; `configuration` launches only the 64 x 64 one.
    """
    THREADS_M, THREADS_N = BM // TM, BN // TN
    LOADS_A = BM * BK // (THREADS_M * THREADS_N)  # elements of A each thread copies per step
    LOADS_B = BK * BN // (THREADS_M * THREADS_N)

    @cuda.jit
    def matmul_register_tiled(C, A, B):
        tile_a = cuda.shared.array((BM, BK), float32)  # a warp's two rows of it are 16 words, 16 banks, apart
        tile_b = cuda.shared.array((BK, BN), float32)
        acc = cuda.local.array((TM, TN), float32)
        a_values = cuda.local.array(TM, float32)
        b_values = cuda.local.array(TN, float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        thread = ty * THREADS_N + tx
        z = cuda.blockIdx.z
        a, b = batch_of(A, z), batch_of(B, z)
        M, N, K = C.shape[1], C.shape[2], A.shape[2]
        row0, col0 = cuda.blockIdx.y * BM, cuda.blockIdx.x * BN
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = float32(0)
        for start in range(0, K, BK):
            for load in range(LOADS_A):  # consecutive threads copy consecutive k of a row of A
                e = load * THREADS_M * THREADS_N + thread
                r, k = e // BK, e % BK
                inside = row0 + r < M and start + k < K
                tile_a[r, k] = A[a, row0 + r, start + k] if inside else float32(0)
            for load in range(LOADS_B):  # ... and consecutive columns of a row of B
                e = load * THREADS_M * THREADS_N + thread
                k, c = e // BN, e % BN
                inside = start + k < K and col0 + c < N
                tile_b[k, c] = B[b, start + k, col0 + c] if inside else float32(0)
            cuda.syncthreads()
            for k in range(BK):
                for i in range(TM):  # this thread's rows: ty, ty + THREADS_M, ...
                    a_values[i] = tile_a[ty + i * THREADS_M, k]
                for j in range(TN):  # its columns: tx, tx + THREADS_N, ... (neighbouring threads, neighbouring banks)
                    b_values[j] = tile_b[k, tx + j * THREADS_N]
                for i in range(TM):
                    for j in range(TN):
                        acc[i, j] += a_values[i] * b_values[j]
            cuda.syncthreads()
        for i in range(TM):
            for j in range(TN):
                r, c = row0 + ty + i * THREADS_M, col0 + tx + j * THREADS_N
                if r < M and c < N:
                    C[z, r, c] = acc[i, j]

    return matmul_register_tiled


matmul_register_tiled = make_register_tiled(BM, BN, TM, TN, BK)


KERNELS = [matmul_naive, matmul_coalesced, matmul_tiled, matmul_register_tiled, matmul_warp_tiled]


def configuration(kernel, shape_c) -> tuple[tuple[int, int, int], tuple[int, ...]]:
    """(grid, block) covering C of shape (batch, M, N) for ``kernel``."""
    if hasattr(kernel, "tiles"):  # a kernel of sgemm.make_warp_tiled
        return sgemm.configuration(kernel, shape_c)
    batch, M, N = shape_c
    if kernel is matmul_register_tiled:
        return (-(-N // BN), -(-M // BM), batch), (THREADS_N, THREADS_M)
    if kernel is matmul_naive:
        return (-(-M // TILE), -(-N // TILE), batch), (TILE, TILE)
    return (-(-N // TILE), -(-M // TILE), batch), (TILE, TILE)


def output_shape(A, B) -> tuple[int, int, int]:
    """C's shape for 3-D ``A`` and ``B``; a clear error when they do not multiply."""
    if A.ndim != 3 or B.ndim != 3:
        raise ValueError(f"A and B must be 3-D (batch, rows, columns), got {A.ndim}-D and {B.ndim}-D")
    if A.shape[2] != B.shape[1]:
        raise ValueError(f"A is {A.shape[1]}x{A.shape[2]} and B is {B.shape[1]}x{B.shape[2]}: "
                         f"A's columns ({A.shape[2]}) must equal B's rows ({B.shape[1]})")
    if A.shape[0] != B.shape[0] and 1 not in (A.shape[0], B.shape[0]):
        raise ValueError(f"batches of {A.shape[0]} and {B.shape[0]} do not broadcast (one of them must be 1)")
    return max(A.shape[0], B.shape[0]), A.shape[1], B.shape[2]


def launch(kernel, C, A, B) -> None:
    """``kernel[grid, block](C, A, B)`` with the grid that covers C; shapes checked first."""
    if tuple(C.shape) != output_shape(A, B):
        raise ValueError(f"C has shape {tuple(C.shape)}; A of {tuple(A.shape)} times B of {tuple(B.shape)} gives "
                         f"{output_shape(A, B)}")
    grid, block = configuration(kernel, C.shape)
    kernel[grid, block](C, A, B)


def matmul(A, B, kernel=matmul_register_tiled) -> np.ndarray:
    """``A @ B`` for 2-D or 3-D float32 host arrays (or what NumPy makes one of), with one of the course's
    kernels."""
    A, B = np.ascontiguousarray(A, np.float32), np.ascontiguousarray(B, np.float32)
    if A.ndim not in (2, 3) or B.ndim not in (2, 3):
        raise ValueError(f"matmul multiplies matrices (2-D) or batches of them (3-D), got {A.ndim}-D and {B.ndim}-D: "
                         "write a vector v as a matrix of one row, v[None], or of one column, v[:, None]")
    A3, B3 = (X if X.ndim == 3 else X[None] for X in (A, B))
    C = np.zeros(output_shape(A3, B3), np.float32)
    if C.size:  # an empty product launches no block
        d_C = cuda.to_device(C)
        launch(kernel, d_C, cuda.to_device(A3), cuda.to_device(B3))
        C = d_C.copy_to_host()
    return C[0] if A.ndim == B.ndim == 2 else C
