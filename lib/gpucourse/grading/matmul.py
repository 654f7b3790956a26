"""Checks for module 3's kernels: transposes, matrix products, warp-per-row sums, coarsened threads.

Every output of a matrix product is a sum of products, so these kernels are
checked as reductions (`gpucourse.grading.check_reduction`): random,
non-uniform inputs, a poisoned ``out`` with a canary after it, unchanged
inputs, and a comparison with the spec computed in float64 within the rounding
of float32 sums, ``1e-5`` times the spec of the absolute values (for
``C = A @ B``, ``|A| @ |B|``, which grows with ``K``). A test cell reads::

    check_matrix_kernel(transpose_kernel, transpose_spec, transpose_tiles([(40, 72)], tile=32),
                        budget=[reads_each_element_once("a"), coalesced("a"), coalesced("out", kind="write")])

The launch plans fix the grid and the block, so a budget can count what each
thread does. The budgets (each a callable taking a launch's trace, as
`check_kernel` and `check_reduction` expect) say what a tiled, coalesced,
conflict-free or coarsened kernel does differently from a naive one that
gives the same numbers.

Lecture 3's puzzles: ``C = A.T @ B`` read in place, one thread per output, coalesced and in float32
(`check_transposed_product`); the tile copies and barriers of a shared-memory product (`check_tile_copies`);
one block's step of a register-tiled product (`check_block_step`).
"""

from __future__ import annotations

import re
from typing import Callable, Iterable, Sequence

import numpy as np

from ..run import ptx
from ..simulator import BudgetExceeded
from .core import (Case, CheckFailed, blocks_needed, case, in_place_of_guard_hint, kernel_name, launch_on_copies,
                   operations_listed)
from .reduction import check_reduction, shared_arrays
from .runner import Launch, check_launches, expected_of, random_values

WARP = 32

# For a read of a tile's cell that nothing wrote, in a shared-memory product
TILE_CELLS = ("Every thread writes its share of both tiles at every step (a cell each, or several in a loop when a "
              "tile has more cells than the block has threads), float32(0) where the element lies past the edge "
              "(row >= M or k >= K for A, k >= K or col >= N for B): a copy under an `if` with no `else` leaves its "
              "cell unwritten. And every thread meets both barriers: none returns before the loop.")


def check_matrix_kernel(
    kernel,
    spec: Callable[..., np.ndarray],
    cases: Iterable[Case],
    *,
    dtype=np.float32,
    seed: int = 0,
    name: str | None = None,
    quiet: bool = False,
    budget=None,
    hint: Callable | None = None,
) -> None:
    """Check ``kernel[grid, block](out, *inputs)`` against ``spec(*inputs)`` for every case.

    As `check_reduction` with mixed-sign values: float outputs may differ from the float64
    spec by the rounding of float32 sums of products (see the module's docstring). A wrong product that is the
    product over the first terms of k only (or none), or a transpose whose tiles are in place but not transposed
    inside, is named as such. A read of a tile's cell that nothing wrote gets what a product's copies must do, or
    for a transpose what its write does wrong (`_transpose_write_hint`). ``hint``: in place of `_matrix_hint`, for a
    kernel whose product is not ``A @ B`` through tiles (`product_hint`).
    """
    __tracebackhide__ = True
    cases = list(cases)
    try:
        check_reduction(kernel, spec, cases, dtype=dtype, seed=seed, name=name, quiet=quiet, budget=budget,
                        hint=hint or _matrix_hint)
    except CheckFailed as failed:
        message = str(failed)
        if SPLIT_WARP in message and all(_is_warp_per_row(kase) for kase in cases):
            raise CheckFailed(message + f"\n  {WARP_PER_ROW_LANES}") from None
        if "which nothing has written (shared memory" not in message:
            raise
        if all(_is_product(kase) for kase in cases):
            message += f"\n  {TILE_CELLS}"
        elif all(_is_transpose(kase) for kase in cases):
            message += _transpose_write_hint(kernel, cases[0].block[0], dtype)
        raise CheckFailed(message) from None


def _is_product(kase: Case) -> bool:
    """``kase`` launches ``C = A @ B`` or ``A @ B.T`` (batched or not)."""
    if len(kase.inputs) != 2 or min(len(s) for s in kase.inputs) < 2:
        return False
    (M, K), (rows, cols), out = kase.inputs[0][-2:], kase.inputs[1][-2:], kase.out[-2:]
    return out[0] == M and ((rows, out[1]) == (K, cols) or (cols, out[1]) == (K, rows))


def _is_warp_per_row(kase: Case) -> bool:
    """``kase`` launches `warp_per_row`: ``y = A @ x`` with blocks of whole warps along x."""
    return (len(kase.inputs) == 2 and len(kase.inputs[0]) == 2 and kase.inputs[1] == kase.inputs[0][1:]
            and kase.out == kase.inputs[0][:1] and kase.block[0] == WARP)


SPLIT_WARP = "is not executing this call"  # the simulator's fault: a lane named in a shuffle's mask is elsewhere
WARP_PER_ROW_LANES = ("One warp per row: the 32 lanes of a warp are threadIdx.x = 0 to 31, and all of them share its "
                      "row, so all of them reach every shuffle. Take the row from threadIdx.y (row = blockIdx.x * "
                      "blockDim.y + threadIdx.y) and the lane from threadIdx.x (swapped, the lanes of one warp get "
                      "different rows and some skip the shuffles), and let only the row decide whether a warp skips "
                      "(if row < A.shape[0]); a lane with no column takes part with float32(0).")


def _is_transpose(kase: Case) -> bool:
    return len(kase.inputs) == 1 and len(kase.inputs[0]) == 2 and kase.out == kase.inputs[0][::-1]


NOT_TRANSPOSED_INSIDE = ("Each tile of out holds its tile of a, but not transposed inside: the block wrote its tile "
                         "as tile[ty, tx] and read it the same way. Read it across, tile[tx, ty], so that a warp "
                         "writes a row of out from a column of the tile.")


def _blockwise(a: np.ndarray, tile: int, move: bool, across: bool) -> np.ndarray:
    """``a`` (a square of whole tiles) with each tile moved to its transposed place or not, transposed inside or
    not."""
    out = np.empty_like(a)
    for r0 in range(0, a.shape[0], tile):
        for c0 in range(0, a.shape[1], tile):
            block = a[r0:r0 + tile, c0:c0 + tile]
            r, c = (c0, r0) if move else (r0, c0)
            out[r:r + tile, c:c + tile] = block.T if across else block
    return out


def _transpose_write_hint(kernel, tile: int, dtype) -> str:
    """For a transpose that read a cell of its tile that nothing wrote: the kernel again, on a square of 2 x 2 whole
    tiles, where no cell goes unwritten, tells a wrong guard (right there) from a wrong write (wrong there)."""
    a = random_values(np.random.default_rng(0), (2 * tile, 2 * tile), dtype)
    try:
        got = launch_on_copies(kernel, (2, 2), (tile, tile), a.shape, dtype, [a])[0]
    except Exception:  # a fault here too: the hint below lists what to look at
        got = None
    write = ("thread (tx, ty) of block (bx, by) writes out[bx * TILE + ty, by * TILE + tx] from tile[tx, ty], if "
             "bx * TILE + ty < out.shape[0] and by * TILE + tx < out.shape[1]")
    if got is not None and np.array_equal(got, a.T):
        return ("\n  On a square a of whole tiles this kernel is right: a guard is wrong at the partial tiles. The "
                "copy's guard is against a's shape (by * TILE + ty < a.shape[0], bx * TILE + tx < a.shape[1]), the "
                f"write's against out's: {write}.")
    if got is not None and np.array_equal(got, _blockwise(a, tile, move=True, across=False)):
        return f"\n  {NOT_TRANSPOSED_INSIDE}"
    if got is not None and np.array_equal(got, _blockwise(a, tile, move=False, across=True)):
        return ("\n  On a square a of whole tiles each tile is transposed but stays in its own block's place: the "
                "write's block offsets are swapped. Tile (by, bx) of a is tile (bx, by) of out: " + write + ".")
    return ("\n  The write reads cells the copy left out. Check the write: it reads the tile across (tile[tx, ty]), "
            "its guard is against out's shape and its block offsets are swapped from the copy's: " + write + ".")


def product_hint(a_transposed: bool = False, tiles: bool = True) -> Callable:
    """`_matrix_hint` for a product ``C = A.T @ B`` (``a_transposed``: A is K x M, read in place) and for a kernel
    whose loop over k runs over no tiles of K (``tiles`` False: one thread's loop, or one step's): its words are
    about that loop, not about counting tiles."""

    def hint(launch, got, first) -> str:
        return _matrix_hint(launch, got, first, a_transposed=a_transposed, tiles=tiles)

    return hint


def _matrix_hint(launch, got, first, a_transposed: bool = False, tiles: bool = True) -> str:
    """What a wrong matrix output is, when it is one of two common mistakes: a product over the first terms of k
    (a loop over the tiles of K that stops early), or a transpose whose tiles are not transposed inside."""
    inputs = [np.asarray(a, np.float64) for a in launch.arguments]
    close = lambda model: model.shape == got.shape and np.allclose(got, model, rtol=1e-4, atol=1e-4)  # noqa: E731
    if len(inputs) == 2 and min(a.ndim for a in inputs) >= 2:
        A, B = inputs
        if a_transposed:
            A = np.swapaxes(A, -1, -2)
        K = A.shape[-1]
        transposed = not a_transposed and B.shape[-1] == K and launch.expected.shape[-1] == B.shape[-2]
        if not transposed and B.shape[-2] != K:  # not C = A @ B nor A @ B.T: nothing to say
            return ""
        for k in range(K - 1, -1, -1):
            try:
                model = A[..., :k] @ (np.swapaxes(B[..., :k], -1, -2) if transposed else B[..., :k, :])
            except ValueError:  # batches that do not broadcast: another product
                return ""
            if close(model) and k:
                return (f"\n  C is the product over the first {k} of the {K} terms of k: " + (
                    "the loop over the tiles of K stops early. Loop while k0 < K, and fill the last tile's columns "
                    "past K with zeros." if tiles else f"the loop over k stops early: it must take all {K}."))
            if close(model):
                return "\n  C is 0 everywhere: nothing was added to the sums." + (
                    f" K // TILE rounds down, to 0 here (K = {K}, less than a tile): a loop over K // TILE tiles never "
                    "runs. Count ceil(K / TILE) tiles, (K + TILE - 1) // TILE." if tiles and K < launch.block[0] else "")
    if len(inputs) == 1 and inputs[0].ndim == 2 and got.shape == inputs[0].shape[::-1]:
        a, (tile_y, tile_x) = inputs[0], (launch.block + (1,))[:2][::-1]
        rows, cols = a.shape
        model = np.full(got.shape, np.nan)
        for r0 in range(0, rows, tile_y):
            for c0 in range(0, cols, tile_x):
                block = a[r0:r0 + tile_y, c0:c0 + tile_x]
                if block.shape[0] == block.shape[1]:  # a square tile, copied in place without its transpose
                    model[c0:c0 + block.shape[0], r0:r0 + block.shape[1]] = block
        if np.isfinite(model).any() and np.allclose(got[np.isfinite(model)], model[np.isfinite(model)]):
            return f"\n  {NOT_TRANSPOSED_INSIDE}"
    return ""


def check_transposed_product(kernel, blocks=((16, 16), (32, 8))) -> None:
    """``kernel[(ceil(N / bx), ceil(M / by)), (bx, by)](C, A, B)`` computes ``C = A.T @ B`` (A is K x M, B is K x N)
    for every block ``(bx, by)``, its warps write neighbouring elements of ``C`` and it computes in float32 only.

    The first shapes give a square ``C``, where a kernel with ``threadIdx.x`` along the rows is right but scatters its
    writes; the others are not multiples of the block. Widths are multiples of 8, so rows start on a sector.
    """
    __tracebackhide__ = True
    shapes = [(1, 1, 1), (37, 40, 40), (70, 20, 48), (5, 33, 24)]  # (K, M, N)
    cases = [case((blocks_needed(N, bx), blocks_needed(M, by)), (bx, by), [(K, M), (K, N)], out=(M, N))
             for K, M, N in shapes for bx, by in blocks]
    check_matrix_kernel(kernel, lambda a, b: a.T @ b, cases, quiet=True,
                        budget=[coalesced("C", kind="write"), float32_only(), sum_in_a_register("C")],
                        hint=product_hint(a_transposed=True, tiles=False))
    print(f"✓ {kernel_name(kernel)}: C = A.T @ B on {len(cases)} launches, neighbouring threads write neighbouring "
          "elements of C, each once from a sum in a register, float32 only")


def sum_in_a_register(name: str):
    """A budget: each element of ``name`` written once and never read back in global memory (its running sum kept
    in a register, as the lectures' kernels do, not added to ``name`` term by term)."""

    def budget(t):
        writes = int(t.writes_per_element(name).max(initial=0))
        reads = int(t.reads_per_element(name).max(initial=0))
        if writes > 1 or reads:
            raise BudgetExceeded(
                f"{t.kernel}: an element of `{name}` is written {writes} and read {reads} times in global memory: "
                f"keep the running sum in a register (a local variable such as acc = float32(0)), and write `{name}` "
                "once, at the end")

    return budget


def check_block_step(kernel, TM: int, TN: int, threads: int = 16, step: int = 16) -> None:
    """``kernel[1, (threads, threads)](C, A, B)``: one block computes ``C = A @ B`` with A of ``threads TM x step``
    and B of ``step x threads TN``, each thread the ``TM x TN`` outputs at rows ``ty + threads i`` and columns
    ``tx + threads j`` (one step of k of a register-tiled kernel, exact sizes: the shape is the puzzle's).

    Its budget: at most ``(TM + TN) / (TM TN)`` shared reads per multiply-add (each value read into a register
    once per k), no bank conflicts, coalesced writes of C, float32 only.
    """
    __tracebackhide__ = True
    cases = [case(1, (threads, threads), [(threads * TM, step), (step, threads * TN)], out=(threads * TM, threads * TN))]
    budget = [shared_reads_per_fma((TM + TN) / (TM * TN), TM * TN, step), conflict_free_shared_memory(),
              coalesced("C", kind="write"), float32_only()]
    for seed in (0, 1):
        check_matrix_kernel(kernel, lambda a, b: a @ b, cases, seed=seed, quiet=True, budget=budget,
                            hint=product_hint(tiles=False))
    print(f"✓ {kernel_name(kernel)}: C = A @ B; {(TM + TN) / (TM * TN):.2f} shared reads per multiply-add, no bank "
          "conflicts, coalesced writes, float32 only")


TILE_COPY_SHAPES = ((40, 40, 40), (17, 70, 33), (48, 32, 64), (1, 5, 1))  # (M, K, N); the first square


# The copies of the tile-copy puzzle's loop, the right one first: what thread (tx, ty) of block (bx, by) puts in
# tile_a[ty, tx] and tile_b[ty, tx] at step `step`, start = step * TILE (row = by * TILE + ty, col = bx * TILE + tx)
A_COPIES = {"A[row, start + tx]": lambda row, start, tx, **_: (row, start + tx),
            "A[row, start + ty]": lambda row, start, ty, **_: (row, start + ty),
            "A[row, step + tx]": lambda row, step, tx, **_: (row, step + tx),
            "A[by * TILE + tx, start + ty]": lambda r0, start, tx, ty, **_: (r0 + tx, start + ty)}
B_COPIES = {"B[start + ty, col]": lambda col, start, ty, **_: (start + ty, col),
            "B[start + tx, col]": lambda col, start, tx, **_: (start + tx, col),
            "B[step + ty, col]": lambda col, step, ty, **_: (step + ty, col),
            "B[start + tx, bx * TILE + ty]": lambda c0, start, tx, ty, **_: (start + tx, c0 + ty)}


def _tiled_product(A, B, tile: int, copy_a, copy_b, stale: bool = False) -> np.ndarray:
    """``C`` of the puzzle's loop in NumPy, its copies ``copy_a`` and ``copy_b`` (of `A_COPIES`, `B_COPIES`): 0 where
    the element lies outside the matrix, or with ``stale`` what the cell held at the step before (0 at first)."""
    (M, K), N = A.shape, B.shape[1]
    ty, tx = np.indices((tile, tile))
    C = np.zeros((M, N))
    for r0 in range(0, M, tile):
        for c0 in range(0, N, tile):
            tiles, acc = [np.zeros((tile, tile)), np.zeros((tile, tile))], np.zeros((tile, tile))
            for step in range(blocks_needed(K, tile)):
                at = dict(row=r0 + ty, col=c0 + tx, r0=r0, c0=c0, start=step * tile, step=step, ty=ty, tx=tx)
                for n, (X, copy) in enumerate(((A, copy_a), (B, copy_b))):
                    i, j = copy(**at)
                    inside = (i >= 0) & (i < X.shape[0]) & (j >= 0) & (j < X.shape[1])
                    value = X[np.clip(i, 0, X.shape[0] - 1), np.clip(j, 0, X.shape[1] - 1)]
                    tiles[n] = np.where(inside, value, tiles[n] if stale else 0)
                acc += tiles[0] @ tiles[1]
            C[r0:r0 + tile, c0:c0 + tile] = acc[:M - r0, :N - c0]
    return C


def _tile_copy_diagnosis(tile: int):
    """A hint for a wrong product of the tile-copy puzzle: what ``C`` is instead of ``A @ B``."""
    right_a, right_b = next(iter(A_COPIES)), next(iter(B_COPIES))

    def hint(launch: Launch, got: np.ndarray, first) -> str:
        A, B = (x.astype(np.float64) for x in launch.arguments)
        K = A.shape[1]
        full = K // tile * tile
        tolerance = 1e-5 * (np.abs(A) @ np.abs(B)) + 1e-6

        def matches(other):
            return other.shape == got.shape and bool(np.all(np.abs(got - other) <= tolerance))

        if not got.any():
            return ("\n  C is all zeros: acc never grew (not written yet?). For every tile along K: copy, wait, "
                    "multiply-add, wait.")
        if A.shape[0] == K and matches(A.T @ B):
            return ("\n  C is A.T @ B: A's indices are swapped. Thread (tx, ty) copies A[row, start + tx], row `row` "
                    "and column start + tx (A is M x K, its second index runs along k).")
        if K == B.shape[1] and matches(A @ B.T):
            return "\n  C is A @ B.T: B's indices are swapped. Thread (tx, ty) copies B[start + ty, col]."
        if full < K and matches(A[:, :full] @ B[:full]):
            return (f"\n  C is the product over the first {full} values of k only: the loop skips the last tile, "
                    f"which is partial (K = {K} is not a multiple of {tile}). Count it: ceil(K / {tile}) steps, "
                    "(K + TILE - 1) // TILE, and let the zeros past the edge fill the rest of the last tile.")
        should = (f"Thread (tx, ty) copies {right_a} into tile_a[ty, tx] and {right_b} into tile_b[ty, tx], "
                  "float32(0) where the element lies past the edge.")
        for a_copy, b_copy in ((a, b) for a in A_COPIES for b in B_COPIES if (a, b) != (right_a, right_b)):
            if matches(_tiled_product(A, B, tile, A_COPIES[a_copy], B_COPIES[b_copy])):
                wrong = [f"tile_{x}[ty, tx] = {c}" for x, c, r in (("a", a_copy, right_a), ("b", b_copy, right_b))
                         if c != r]
                which = "that copy reads the wrong element" if len(wrong) == 1 else "both copies read the wrong one"
                return f"\n  C is what the loop gives with {' and '.join(wrong)}: {which}. {should}"
        if full < K and matches(_tiled_product(A, B, tile, A_COPIES[right_a], B_COPIES[right_b], stale=True)):
            return (f"\n  K = {K} is not a multiple of {tile}: the last tile along K is partial. At that step every "
                    "cell of the tiles past K must hold a zero, not what the previous step left there: write "
                    "float32(0) where the element lies past the edge.")
        return f"\n  Check the copies: {should}"

    return hint


def _tile_copy_fault_hint(message: str) -> str:
    """A hint for a launch of the tile-copy puzzle that the simulator stopped: which part of the copy is missing."""
    if "data race" in message:
        return ("\n  Two barriers per step: one after the copies (both tiles complete before anyone reads them), one "
                "after the multiply-adds (everyone done with the tiles before the next copy overwrites them).")
    if "which nothing has written (shared memory" in message:
        return f"\n  {TILE_CELLS}"
    if "out of bounds for `A`" in message or "out of bounds for `B`" in message:
        return ("\n  A thread whose element lies past the edge of A (row >= M or k >= K) or of B (k >= K or "
                "col >= N) still has a cell of the tile to fill: it writes float32(0) there instead of reading.")
    return ""


def check_tile_copies(kernel, tile: int = 16) -> None:
    """``kernel[(ceil(N / tile), ceil(M / tile)), (tile, tile)](C, A, B)`` computes ``C = A @ B`` (A is M x K, B is
    K x N) through ``tile x tile`` shared tiles, and each thread reads A and B once per tile along K.

    The shapes are not multiples of the tile, but for one; the first is square, so that swapped indices of A or B
    give a wrong product instead of a read past the end. A wrong product or a stopped launch gets a hint: the
    indices swapped, the last partial tile skipped, no zeros past the edges, a barrier missing.
    """
    __tracebackhide__ = True
    rng = np.random.default_rng(3)

    def launches():
        for M, K, N in TILE_COPY_SHAPES:
            A, B = random_values(rng, (M, K), np.float32), random_values(rng, (K, N), np.float32)
            yield Launch((blocks_needed(N, tile), blocks_needed(M, tile)), (tile, tile),
                         f"A of {(M, K)}, B of {(K, N)} -> C of {(M, N)}", [A, B], expected_of(np.matmul, np.float32, A, B),
                         expected_of(np.matmul, np.float32, np.abs(A), np.abs(B)))

    budget = [tiled_reads("A", tile=tile), tiled_reads("B", tile=tile, axis=-2),
              coalesced("A", "B", sectors=6),  # a warp: two rows of a tile, 6 sectors when they start mid-sector
              float32_only()]  # `else 0.`: a conversion to float64 and back at every copy
    try:
        check_launches(kernel, launches(), dtype=np.float32, name=None, quiet=True, budget=budget,
                       hint=_tile_copy_diagnosis(tile))
    except CheckFailed as failed:
        message = str(failed)
        hint = _tile_copy_fault_hint(message)  # in place of the general advice about guards, which would mislead
        raise CheckFailed(in_place_of_guard_hint(message, hint) if hint else message) from None
    print(f"✓ {kernel_name(kernel)}: C = A @ B on {len(TILE_COPY_SHAPES)} shapes, one of them a multiple of the "
          f"{tile} x {tile} tile; A and B read once per tile along K")


# ---------------------------------------------------------------- launch plans


def transpose_tiles(shapes: Iterable[tuple[int, int]], tile: int = 32) -> list[Case]:
    """One block of ``tile x tile`` threads per tile of each ``(rows, cols)`` input; ``out`` is ``(cols, rows)``.

    ``threadIdx.x`` runs along the input's columns: ``grid = (ceil(cols / tile), ceil(rows / tile))``.
    """
    return [case((blocks_needed(cols, tile), blocks_needed(rows, tile)), (tile, tile), [(rows, cols)],
                 out=(cols, rows))
            for rows, cols in shapes]


def matmul_tiles(shapes: Iterable[Sequence[int]], tile: int = 32, transpose_b: bool = False) -> list[Case]:
    """One block of ``tile x tile`` threads per tile of ``C``, one grid layer per batch element.

    Each shape is ``(batch_a, batch_b, M, K, N)``: ``A`` is ``(batch_a, M, K)``, ``B`` is
    ``(batch_b, K, N)``, or ``(batch_b, N, K)`` with ``transpose_b``, and ``C`` is
    ``(batch, M, N)``; a batch of 1 is broadcast. ``threadIdx.x`` runs along the columns of
    ``C``: ``grid = (ceil(N / tile), ceil(M / tile), batch)``.
    """
    cases = []
    for batch_a, batch_b, M, K, N in shapes:
        if batch_a != batch_b and 1 not in (batch_a, batch_b):
            raise ValueError(f"batches of {batch_a} and {batch_b} do not broadcast")
        batch = max(batch_a, batch_b)
        b_shape = (batch_b, N, K) if transpose_b else (batch_b, K, N)
        cases.append(case((blocks_needed(N, tile), blocks_needed(M, tile), batch), (tile, tile),
                          [(batch_a, M, K), b_shape], out=(batch, M, N)))
    return cases


def register_tiles(shapes: Iterable[Sequence[int]], block_tile: int = 64, threads: int = 16) -> list[Case]:
    """``C = A @ B.T`` with a register micro-tile: blocks of ``threads x threads`` threads per ``block_tile`` tile.

    Each shape is ``(batch_a, batch_b, M, K, N)``: ``A`` is ``(batch_a, M, K)``, ``B`` is
    ``(batch_b, N, K)`` and ``C`` is ``(batch, M, N)``, a batch of 1 broadcast. Each thread
    computes ``(block_tile / threads)**2`` outputs: ``grid = (ceil(N / block_tile), ceil(M / block_tile), batch)``.
    """
    cases = []
    for batch_a, batch_b, M, K, N in shapes:
        if batch_a != batch_b and 1 not in (batch_a, batch_b):
            raise ValueError(f"batches of {batch_a} and {batch_b} do not broadcast")
        cases.append(case((blocks_needed(N, block_tile), blocks_needed(M, block_tile), max(batch_a, batch_b)),
                          (threads, threads), [(batch_a, M, K), (batch_b, N, K)], out=(max(batch_a, batch_b), M, N)))
    return cases


def warp_per_row(shapes: Iterable[tuple[int, int]], warps: Iterable[int] = (4,)) -> list[Case]:
    """One warp per row of a ``(rows, cols)`` matrix ``A``: blocks of ``(32, w)`` threads for each ``w``.

    Inputs ``A`` and a vector ``x`` of ``cols``; ``out`` has one element per row. Warp
    ``threadIdx.y`` of block ``blockIdx.x`` owns row ``blockIdx.x * w + threadIdx.y``:
    ``grid = ceil(rows / w)``.
    """
    warps = list(warps)
    return [case(blocks_needed(rows, w), (WARP, w), [(rows, cols), (cols,)], out=(rows,))
            for rows, cols in shapes for w in warps]


def coarsened_grid(shapes: Iterable[Sequence[int]], coarsen: int, block: tuple[int, int] = (32, 8)) -> list[Case]:
    """A fixed grid in which every thread computes ``coarsen`` elements of a row of ``out``.

    Each shape is ``(batch, M, N, K)``: inputs of ``(batch, M, N)`` and ``(batch, M, K)``
    (a product that sums over the batch and ``M``, as a weight gradient does), ``out`` is
    ``(N, K)``. A block of ``(bx, by)`` threads covers ``by`` rows and ``bx * coarsen``
    columns of ``out``: ``grid = (ceil(K / (bx * coarsen)), ceil(N / by))``.
    """
    bx, by = block
    return [case((blocks_needed(K, bx * coarsen), blocks_needed(N, by)), (bx, by),
                 [(batch, M, N), (batch, M, K)], out=(N, K))
            for batch, M, N, K in shapes]


# ---------------------------------------------------------------- budgets


def coalesced(*names: str, kind: str = "read", sectors: float = 4):
    """A budget: warp ``kind``s (``"read"`` or ``"write"``) of each array touch at most ``sectors`` per request.

    32 neighbouring float32 elements are 128 bytes, 4 sectors of 32 bytes when a row starts on a
    sector: the tests that use this budget keep rows 32-byte aligned (widths multiple of 8, or short).
    """

    def budget(t):
        for name in names:
            t.assert_sectors_per_request(name, sectors, kind)

    return budget


def reads_per_thread(name: str, at_most, why: str = ""):
    """A budget: no thread reads ``name`` from global memory more than ``at_most`` times.

    ``at_most`` is a number, or a function of the array's shape (``lambda shape: shape[0] * shape[1]``);
    ``why`` is added to the message, to say what the limit stands for.
    """

    def budget(t):
        limit = at_most(t.array(name).shape) if callable(at_most) else at_most
        try:
            t.assert_reads_per_thread(name, int(limit))
        except BudgetExceeded as exc:
            raise BudgetExceeded(f"{exc}{': ' + why if why else ''}") from None

    return budget


def tiled_reads(*names: str, tile: int, axis: int = -1):
    """A budget: each thread reads each array at most ``ceil(K / tile)`` times, ``K`` its dimension ``axis``.

    That is one element per tile step of a kernel that copies tiles into shared memory and
    computes from there; a naive kernel reads ``K`` elements per thread. ``K`` is the last
    dimension (``axis=-1``) of ``A`` and of ``B`` in ``C = A @ B.T``; of ``B`` in ``C = A @ B`` it is
    ``axis=-2``.
    """
    budgets = [
        reads_per_thread(name, lambda shape: blocks_needed(shape[axis], tile),
                         why=f"a tiled kernel copies one element of `{name}` per tile of {tile} and reads the "
                             "rest from shared memory")
        for name in names
    ]

    def budget(t):
        for check in budgets:
            check(t)

    return budget


def warp_reads_its_row(name: str):
    """A budget for one warp per row of a 2-D ``name``: each element read once, coalesced.

    No lane reads more than ``ceil(cols / 32)`` elements: the 32 lanes of the row's warp share them.
    """

    def budget(t):
        t.assert_reads_per_element(name, exactly=1)
        cols = t.array(name).shape[1]
        reads_per_thread(name, blocks_needed(cols, WARP),
                         why=f"the 32 lanes of a warp share the {cols} elements of its row")(t)
        t.assert_sectors_per_request(name, 4)

    return budget


def shared_reads_per_fma(at_most: float, outputs_per_thread: int, step: int, k_of: str = "A", axis: int = -1):
    """A budget: each thread reads shared memory at most ``at_most`` times per multiply-add it does.

    A thread of a register-tiled product computes ``outputs_per_thread`` outputs, each a sum over
    ``K`` (dimension ``axis`` of ``k_of``) taken in steps of ``step`` (zeros past the end): it does
    ``outputs_per_thread * ceil(K / step) * step`` multiply-adds. With one output per thread that is
    2 shared reads per multiply-add; a ``TM x TN`` micro-tile that keeps ``TM`` values of one tile
    and ``TN`` of the other in registers reads ``(TM + TN) / (TM * TN)``. The kernel must use shared
    memory (reading the global arrays directly is not what this budget measures).
    """

    def budget(t):
        shared = shared_arrays(t)
        if not shared:
            raise BudgetExceeded(f"{t.kernel}: uses no shared memory; stage the tiles in shared arrays and compute "
                                 "from there")
        reads = sum(t.reads_per_thread(name) for name in shared)
        K = t.array(k_of).shape[axis]
        fmas = outputs_per_thread * blocks_needed(K, step) * step
        worst = int(np.argmax(reads))
        ratio = reads[worst] / fmas
        if ratio > at_most + 1e-9:
            raise BudgetExceeded(
                f"{t.kernel}: {t.geometry.thread_name(worst)} read shared memory {int(reads[worst])} times for its "
                f"{fmas} multiply-adds ({outputs_per_thread} outputs x {blocks_needed(K, step) * step} steps of k), "
                f"{ratio:.2f} reads per multiply-add, more than {at_most:g}: at each k, load the micro-tile's values "
                "of each shared tile into registers once (a local array) and multiply every pair of them"
            )

    return budget


def conflict_free_shared_memory():
    """A budget: the kernel keeps data in shared memory, and no warp access to it has a bank conflict."""

    def budget(t):
        if not shared_arrays(t):
            raise BudgetExceeded(f"{t.kernel}: uses no shared memory; stage the tiles in a shared array")
        t.assert_no_bank_conflicts()

    return budget


def barrier_before_reads():
    """A budget: every read of a shared array reads an element written before a barrier, not since.

    A tile goes in, the block waits at ``cuda.syncthreads()``, and only then do its threads read it. A read
    of an element written in the same stretch between barriers (no barrier, or one before the copy in) is
    a race in any kernel whose threads read what others copied, even where, as in a copy, each thread
    happens to read its own element.
    """

    def budget(t):
        shared = shared_arrays(t)
        if not shared:
            raise BudgetExceeded(f"{t.kernel}: uses no shared memory; stage the tile in a shared array")
        stretches = int(t.block_barriers.max(initial=0)) + 1
        for name in shared:
            array = t.array(name)

            def stretch(blocks, elements, phases):
                return (blocks * array.size + elements) * stretches + phases

            written = [stretch(b, e, p) for kind, _, e, b, p, _ in array.events if kind == "write"]
            written = np.concatenate(written) if written else np.zeros(0, np.int64)
            for kind, lanes, elements, blocks, phases, _ in array.events:
                unsynced = np.isin(stretch(blocks, elements, phases), written) if kind == "read" else []
                if np.any(unsynced):
                    k = int(np.argmax(unsynced))
                    index = [int(i) for i in np.unravel_index(int(elements[k]), array.shape)]
                    raise BudgetExceeded(
                        f"{t.kernel}: {t.geometry.thread_name(int(lanes[k]))} reads `{name}{index}` with no barrier "
                        "since it was written: copy the tile in, wait at cuda.syncthreads(), then read it (threads "
                        "of a tiled kernel read what other threads copied, which only that barrier makes safe)"
                    )

    return budget


def no_shared_memory(instead: str = "warp shuffles"):
    """A budget: the kernel uses no shared memory (its threads combine values with ``instead``)."""

    def budget(t):
        shared = shared_arrays(t)
        if shared:
            raise BudgetExceeded(f"{t.kernel}: uses shared memory (`{shared[0]}`); combine the values with "
                                 f"{instead}, which need none")

    return budget


def no_local_memory():
    """A budget: no local memory in the kernel's PTX (no ``ld.local``/``st.local``): its per-thread arrays (a
    micro-tile of running sums, the values of a step) stay in registers."""

    def budget(t):
        found = ptx.local_memory(t.function)
        if found is None:
            raise RuntimeError(f"`{t.kernel}` was not compiled to PTX (GPUCOURSE_PTX_CHECK=off?): cannot check")
        loads, stores = found
        if loads or stores:
            raise BudgetExceeded(
                f"{t.kernel}: its PTX has {loads} ld.local and {stores} st.local: a per-thread array is in local "
                "memory (as slow as global memory), not in registers. The compiler keeps a cuda.local.array in "
                "registers only when every index is a constant once it has unrolled the loops: loop over the "
                "constants (range(TM)), not over a bound computed at run time, and index with the loop variables "
                "alone (acc[i, j], not acc[(i + k) % TM, j])."
            )

    return budget


FLOAT64_CAUSES = ("A literal such as `0.`, `1.0` or `-math.inf` is a float64 and makes what it touches float64, and so "
                  "does a float32 divided by an integer (`total / n`) or taken with one in max or min (`max(x, 0)`): "
                  "write float32(0), float32(-math.inf), total / float32(n), max(x, float32(0)). numba also compares "
                  "and adds a uint64 and a signed integer in float64 (`uint64(j) < x.shape[1]`): make both unsigned.")
# An integer converted to float64 (cvt.rn.f64.s64), divided, rounded up or down and converted back: a tile count
TILE_COUNT = tuple(re.compile(op) for op in (r"cvt\.rn\.f64$", r"cvt\.r[pm]i\.f64\.f64$",
                                             r"cvt\.rzi\.[su](32|64)\.f64$"))


def float32_only():
    """A budget: no float64 arithmetic in the kernel's PTX (``acc = 0.`` makes a float64 accumulator)."""

    def budget(t):
        found = ptx.float_operations(t.function)
        if found is None:
            raise RuntimeError(f"`{t.kernel}` was not compiled to PTX (GPUCOURSE_PTX_CHECK=off?): cannot check")
        if found:
            listed = operations_listed(found)
            counted = [{op for op in found if pattern.match(op)} for pattern in TILE_COUNT]
            why = FLOAT64_CAUSES
            if all(counted):
                rest = set(found).difference(*counted, {"mul.f64", "div.rn.f64"})
                why = ("`K / TILE` of two integers is a float64 (in Python and in numba), and math.ceil (or "
                       "math.floor) rounds it as a float64: count tiles with integers, (K + TILE - 1) // TILE." +
                       (f" For the other float64 operations: {FLOAT64_CAUSES}" if rest else ""))
            raise BudgetExceeded(f"{t.kernel}: computes in float64 on the GPU ({listed} in its PTX). {why}")

    return budget
