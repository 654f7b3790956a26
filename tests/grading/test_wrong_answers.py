"""Assignments 1 to 3, 5 and 7: plausible wrong answers lose marks in the solution notebook's own test cells, and
right answers other than the solution's keep them.

Each wrong answer is the solution's answer with a change a student makes, one that used to get full marks.
It is run against the test cell that must now take a mark away, as nbgrader runs it (visible and hidden
tests together), and must fail it with the message that says what is wrong: a loop in one thread where the
exercise asks for a tree, a tile read with no barrier after its copy, float64 arithmetic (a `0.`, a
`-math.inf`, a division by an integer), copies or writes that do not coalesce.

And in every assignment, a kernel that does nothing fails each check, visible or hidden, that launches it.
"""

import ast
import re

import nbformat
import pytest

from gpucourse import simulated
from gpucourse.grading import CheckFailed

from conftest import ROOT

NOTEBOOKS = {
    "01": ROOT / "solutions" / "01_threads_blocks_grids" / "threads_blocks_grids.ipynb",
    "02": ROOT / "solutions" / "02_map_zip_reduce" / "map_zip_reduce.ipynb",
    "03": ROOT / "solutions" / "03_matmul" / "matmul.ipynb",
    "05": ROOT / "solutions" / "05_fusion" / "fusion.ipynb",
    "07": ROOT / "solutions" / "07_tuning" / "tuning.ipynb",
}

FLOAT64 = r"computes in float64 on the GPU \(.*\.f64.* in its PTX\)"
NO_BARRIER = r"reads `tile\[0, 0\]` with no barrier since it was written"
SCAN_LOADS = ("s[t] = a[t] if t < n else float32(0)  # two elements per thread, zeros past the end\n"
              "    s[t + T] = a[t + T] if t + T < n else float32(0)\n")
NO_SWAP = ("left = s[i - d]\n            s[i - d] = s[i]\n            s[i] += left", "s[i] += s[i - d]")
NT_LOOP = "    for k0 in range(0, K, TILE):\n"
MICRO_LOOP = "    for k0 in range(0, K, BK):\n"
TRANSPOSE_WRITE = ("if col0 + ty < out.shape[0] and row0 + tx < out.shape[1]:\n"
                   "        out[col0 + ty, row0 + tx] = tile[tx, ty]")
TILE_COUNT = ("(?m)" + FLOAT64 + r"\. `K / TILE` of two integers is a float64 .*: count tiles with integers, "
              r"\(K \+ TILE - 1\) // TILE\.$")
NO_TILES = (r"C is 0 everywhere: nothing was added to the sums\. K // TILE rounds down, to 0 here "
            r"\(K = 3, less than a tile\)")
UNWRITTEN_TILE = (r"which nothing has written \(shared memory.*\n(.*\n)?  Every thread writes its share of both tiles "
                  r"at every step \(a cell each, or several in a loop .*a copy under an `if` with no `else` leaves its "
                  r"cell unwritten\. And every thread meets both barriers: none returns before the loop\.$")
X_ALONG_COLUMNS = r"as if the row came from x .* cuda\.grid\(2\) gives \(x, y\): x counts along a row's columns"
SCAN_OF_ONE = (r"inputs \(1,\) -> out \(1,\):\n.*\n.*\n  With one element, out\[0\] = a\[0\] fits three mistakes: "
               r"the down-sweep started from the total .*; the inclusive scan .*; or a down-sweep without the swap")

# (assignment, answer cell, test cell, the student's changes to the solution's answer, what the failure says)
WRONG_ANSWERS = {
    "thread 0 adds up the block's slots in a loop": (
        "01", "block_sum_kernel", "test_block_sum_budget",
        [("stride = cuda.blockDim.x // 2", "stride = 0"),
         ("        out[cuda.blockIdx.x] = partial[0]", "        for k in range(1, cuda.blockDim.x):\n"
                                                     "            partial[0] += partial[k]\n"
                                                     "        out[cuda.blockIdx.x] = partial[0]")],
        r"read shared memory 63 times, more than 16 \(3 per level of a tree"),
    "one thread doubles the whole array": (
        "01", "double_stride_kernel", "test_double_stride",
        [("start = cuda.grid(1)\n", "start = cuda.grid(1) * out.size\n"), ("step = cuda.gridsize(1)", "step = 1")],
        r"may read `a` at most 3 times"),
    "a contiguous chunk per thread, not a grid-stride loop": (
        "01", "double_stride_kernel", "test_double_stride",
        [("    for i in range(start, out.size, step):",
          "    chunk = (out.size + step - 1) // step\n"
          "    for i in range(start * chunk, min(start * chunk + chunk, out.size)):")],
        r"sectors .*coalesc"),
    "a halo whose zeros are float64": (
        "01", "sum3_kernel", "test_sum3_halo", [("else float32(0)", "else 0.")], FLOAT64),
    "a grid-stride loop that computes in float64": (
        "01", "double_stride_kernel", "test_double_stride", [("float32(2) * a[i]", "(a[i] + 0.5) * 2 - 1")], FLOAT64),
    "a scan whose down-sweep swaps through a float64": (
        "02", "blelloch_scan_kernel", "test_blelloch_scan_once", [("left = s[i - d]", "left = s[i - d] + 0.0")],
        FLOAT64),
    "a micro-tile of sums indexed at run time (local memory)": (
        "03", "matmul_micro_tile_kernel", "test_matmul_micro_tile_shared_reads",
        [("acc[i, j] += a_values[i] * b_values[j]", "acc[(i + k) % TM, j] += a_values[(i + k) % TM] * b_values[j]")],
        r"ld.local .*not in registers"),
    "a transpose that reads its tile back as it wrote it, and writes a column of out": (
        "03", "transpose_kernel", "test_transpose_banks",
        [("if col0 + ty < out.shape[0] and row0 + tx < out.shape[1]:\n        out[col0 + ty, row0 + tx] = tile[tx, ty]",
          "if row0 + ty < a.shape[0] and col0 + tx < a.shape[1]:\n        out[col0 + tx, row0 + ty] = tile[ty, tx]")],
        r"warp writes of `out` touch .* sectors"),
    "a tile count from math.ceil(K / TILE), in float64": (
        "03", "matmul_nt_kernel", "test_matmul_nt_tiled",
        [(NT_LOOP, "    for t in range(math.ceil(K / TILE)):\n        k0 = t * TILE\n")], TILE_COUNT),
    "a micro-tile's tile count from math.ceil(K / BK), in float64": (
        "03", "matmul_micro_tile_kernel", "test_matmul_micro_tile_global_reads",
        [(MICRO_LOOP, "    for t in range(math.ceil(K / BK)):\n        k0 = t * BK\n")], TILE_COUNT),
    "K // TILE tiles (none when K < TILE)": (
        "03", "matmul_nt_kernel", "test_matmul_nt",
        [(NT_LOOP, "    for t in range(K // TILE):\n        k0 = t * TILE\n")], NO_TILES),
    "K // BK tiles of a micro-tile (none when K < BK)": (
        "03", "matmul_micro_tile_kernel", "test_matmul_micro_tile",
        [(MICRO_LOOP, "    for t in range(K // BK):\n        k0 = t * BK\n")], NO_TILES),
    "a tile copy under an if with no else": (
        "03", "matmul_nt_kernel", "test_matmul_nt",
        [("tile_a[ty, tx] = A[a, row, k] if row < M and k < K else float32(0)",
          "if row < M and k < K:\n            tile_a[ty, tx] = A[a, row, k]")], UNWRITTEN_TILE),
    "threads outside C return before the tile loop": (
        "03", "matmul_nt_kernel", "test_matmul_nt",
        [("    acc = float32(0)\n", "    acc = float32(0)\n    if row >= M or col >= N:\n        return\n")],
        UNWRITTEN_TILE),
    "a micro-tile copy of one element per thread, not four": (
        "03", "matmul_micro_tile_kernel", "test_matmul_micro_tile",
        [("for e in range(me, BM * BK, THREADS * THREADS):", "for e in range(me, me + 1):")], UNWRITTEN_TILE),
    "a transpose that reads its tile back as it wrote it": (
        "03", "transpose_kernel", "test_transpose", [("tile[tx, ty]", "tile[ty, tx]")],
        r"reads `tile\[0, 3\]`, which nothing has written .*\n  Each tile of out holds its tile of a, but not "
        r"transposed inside.* Read it across, tile\[tx, ty\]"),
    "a transpose whose write is guarded by the copy's guard": (
        "03", "transpose_kernel", "test_transpose",
        [(TRANSPOSE_WRITE, TRANSPOSE_WRITE.replace("col0 + ty < out.shape[0] and row0 + tx < out.shape[1]",
                                                   "row0 + ty < a.shape[0] and col0 + tx < a.shape[1]"))],
        r"which nothing has written .*\n  On a square a of whole tiles this kernel is right: a guard is wrong at the "
        r"partial tiles\. .*the write's against out's"),
    "a transpose that writes each tile at its own block's place": (
        "03", "transpose_kernel", "test_transpose",
        [(TRANSPOSE_WRITE, "if row0 + ty < out.shape[0] and col0 + tx < out.shape[1]:\n"
                           "        out[row0 + ty, col0 + tx] = tile[tx, ty]")],
        r"which nothing has written .*\n  On a square a of whole tiles each tile is transposed but stays in its own "
        r"block's place: the write's block offsets are swapped"),
    "a grid-stride loop that reads a[i] twice": (
        "01", "double_stride_kernel", "test_double_stride", [("float32(2) * a[i]", "a[i] + a[i]")],
        r"`a\[0\]` was read 2 times .* \(thread threadIdx=\(0, 0, 0\) of block blockIdx=\(0, 0, 0\) read `a\[0\]` "
        r"twice: read it once into a variable, x = a\[i\], and use x twice\)"),
    "a 2-D grid with the row from x and the column from y": (
        "01", "add_2d_kernel", "test_add_2d", [("c, r = cuda.grid(2)", "r, c = cuda.grid(2)")],
        r"Only out\[0:5, 0:6\] was written, " + X_ALONG_COLUMNS),
    "a 2-D block with the row from threadIdx.x": (
        "01", "map_2d_kernel", "test_map_2d",
        [("c = cuda.threadIdx.x\n    r = cuda.threadIdx.y", "r = cuda.threadIdx.x\n    c = cuda.threadIdx.y")],
        r"Only out\[0:2, 0:4\] was written, " + X_ALONG_COLUMNS),
    "a tile copy with the row from x and the column from y": (
        "01", "tile_copy_kernel", "test_tile_copy", [("c, r = cuda.grid(2)", "r, c = cuda.grid(2)")],
        r"Only out\[0:20, 0:32\] was written, " + X_ALONG_COLUMNS),
    "the tuned softmax's bound and waves written down, not asked of the model": (
        "07", "tune_and_explain", "test_tune_softmax",
        [("return result, picked.bound_by, picked.waves", "return result, \"instruction issue\", 1")],
        r"has waves = \d+, not 1"),
    "a tile copy with no barrier": (
        "01", "tile_copy_kernel", "test_tile_copy_budget",
        [("    cuda.syncthreads()  # the whole tile is in shared memory\n", "")],
        NO_BARRIER),
    "a tile copy with its barrier before the copy in": (
        "01", "tile_copy_kernel", "test_tile_copy_budget",
        [("    cuda.syncthreads()  # the whole tile is in shared memory\n", ""),
         ("    inside = ", "    cuda.syncthreads()\n    inside = ")],
        NO_BARRIER),
    "a mean summed from 0.": (
        "02", "mean_axis_kernel", "test_mean_axis_float32", [("total = float32(0)", "total = 0.")], FLOAT64),
    "a mean divided by the integer n": (
        "02", "mean_axis_kernel", "test_mean_axis_float32", [("total / float32(n)", "total / n")],
        FLOAT64 + r".*a float32 divided by an integer"),
    "a mean multiplied by 1 / n": (
        "02", "mean_axis_kernel", "test_mean_axis_float32", [("total / float32(n)", "total * (1 / n)")], FLOAT64),
    "a stencil summed from 0.0": (
        "02", "stencil_kernel", "test_stencil_halo", [("total = float32(0)", "total = 0.0")], FLOAT64),
    "a row max started at -math.inf": (
        "02", "row_max_kernel", "test_row_max_budget", [("float32(-math.inf)", "-math.inf")],
        FLOAT64 + r".*`-math.inf` is a float64"),
    "thread 0 takes the max of the block's values in a loop": (
        "02", "row_max_kernel", "test_row_max_budget",
        [("stride = cuda.blockDim.x // 2", "stride = 0"),
         ("        out[r] = best[0]", "        for k in range(1, cuda.blockDim.x):\n"
                                   "            best[0] = max(best[0], best[k])\n"
                                   "        out[r] = best[0]")],
        r"read shared memory 63 times, more than 16 \(3 per level of a tree"),
    "a row max padded with 0 (right on the budget's own visible data)": (
        "02", "row_max_kernel", "test_row_max_budget", [("float32(-math.inf)", "float32(0)")],
        r"gave a wrong result .*\n.*\n.*\n  Every input value of this test is negative"),
    "thread 0 scans the shared array in a loop": (
        "02", "blelloch_scan_kernel", "test_blelloch_scan_work_efficient",
        [("    d = 1\n", "    cuda.syncthreads()\n"
                       "    if t == 0:\n"
                       "        total = float32(0)\n"
                       "        for e in range(m):\n"
                       "            x = s[e]\n"
                       "            s[e] = total\n"
                       "            total += x\n"
                       "    d = m\n"),  # the sweeps' loops do nothing now
         ("    if t == 0:\n        s[m - 1] = float32(0)\n", ""), ("d = m // 2", "d = 0")],
        r"read shared memory 258 times, more than 50 \(6 per level of a tree over the block's 256 values"),
    "thread 0 loads the whole scan": (
        "02", "blelloch_scan_kernel", "test_blelloch_scan_once",
        [(SCAN_LOADS, "if t == 0:\n        for e in range(m):\n            s[e] = a[e] if e < n else float32(0)\n")],
        r"each thread may read `a` at most 2 times, but thread threadIdx=\(0, 0, 0\) .* read it 7 times: spread the "
        r"work"),
    "a scan that keeps the root, on one element": (
        "02", "blelloch_scan_kernel", "test_blelloch_scan", [("    if t == 0:\n        s[m - 1] = float32(0)\n", "")],
        SCAN_OF_ONE),
    "an inclusive scan, on one element": (
        "02", "blelloch_scan_kernel", "test_blelloch_scan", [("out[t] = s[t]\n", "out[t] = s[t] + a[t]\n")],
        SCAN_OF_ONE),
    "a down-sweep without the swap, on one element": (
        "02", "blelloch_scan_kernel", "test_blelloch_scan", [NO_SWAP], SCAN_OF_ONE),
    "a down-sweep without the swap": (
        "02", "blelloch_scan_kernel", "test_blelloch_scan_once", [NO_SWAP],
        r"inputs \(7,\) -> out \(7,\):\n.*\n.*\n  out\[i\] is still a\[i\] at every even i .*: the down-sweep never "
        r"wrote element i − d"),
    "a tiled product summed from 0.": (
        "03", "matmul_nt_kernel", "test_matmul_nt_tiled", [("acc = float32(0)", "acc = 0.")], FLOAT64),
    "micro-tile copies down the columns of the tile": (
        "03", "matmul_micro_tile_kernel", "test_matmul_micro_tile_global_reads",
        [("r, c = e // BK, e % BK", "r, c = e % BM, e // BM")],
        r"warp reads of `A` touch [0-9.]+ sectors of 32 bytes each on average, more than 4"),
    "a micro-tile of neighbouring outputs": (
        "03", "matmul_micro_tile_kernel", "test_matmul_micro_tile_global_reads",
        [("tile_a[ty + i * THREADS, k]", "tile_a[ty * TM + i, k]"),
         ("tile_b[tx + j * THREADS, k]", "tile_b[tx * TM + j, k]"),
         ("row0 + ty + i * THREADS, col0 + tx + j * THREADS", "row0 + ty * TM + i, col0 + tx * TM + j")],
        r"warp writes of `C` touch [0-9.]+ sectors of 32 bytes each on average, more than 4"),
    "a LayerNorm whose counts are Python numbers": (
        "05", "layernorm_kernel", "test_layernorm_one_pass",
        [("n, mean, m2 = float32(0), float32(0), float32(0)", "n, mean, m2 = 0, float32(0), float32(0)"),
         ("welford_merge(n, mean, m2, float32(1), x[row, c], float32(0))", "welford_merge(n, mean, m2, 1, x[row, c], 0)")],
        FLOAT64),
    "an online softmax started from -math.inf": (
        "05", "softmax_online_kernel", "test_softmax_online_passes",
        [("m, l = float32(-math.inf), float32(0)", "m, l = -math.inf, 0.0")], FLOAT64),
    "a cross-entropy summed from 0.0": (
        "05", "cross_entropy_kernel", "test_cross_entropy_one_pass",
        [("m, l, picked = float32(-math.inf), float32(0), float32(0)", "m, l, picked = -math.inf, 0.0, 0.0")],
        FLOAT64),
    "GELU's exact erf form where the exercise asks for the tanh form": (
        "05", "linear_gelu_kernel", "test_linear_gelu",
        [("C[row, col] = float32(0.5) * z * (float32(1) + math.tanh(inner))",
          "C[row, col] = float32(0.5) * z * (float32(1) + math.erf(z / math.sqrt(float32(2))))")],
        r"its output is GELU's exact form, 0\.5 z \(1 \+ erf\(z / sqrt\(2\)\)\), but the exercise asks for its tanh "
        r"form, gelu\(z\) = 0\.5 z \(1 \+ tanh\(sqrt\(2 / pi\) \(z \+ 0\.044715 z\^3\)\)\)"),
    "a flash update whose row max shuffles with offset 1 alone": (
        "05", "online_softmax_tile", "test_flash_attention",
        [("for offset in (2, 1):", "for offset in (1,):")],
        r"its output is what query \d+ gets when its max is taken over 2 of its 4 lanes \(shuffle offset 1 alone: "
        r"lanes 4g and 4g \+ 1 share one max.*shuffle with offsets 2 and 1"),
    "a constraint without the register file's limit": (
        "07", "constraint", "test_constraint_boundaries", [(" or registers * threads > 65536", "")],
        r"allowed a config that cannot run: 68 registers per thread"),
    "a cache lookup that takes an empty result for a miss": (
        "07", "cache_key", "test_cached_tune", [("if hit is not None:", "if hit:")], r"called tune\(\) again"),
    "occupancy with registers not rounded up to 256 a warp": (
        "07", "occupancy", "test_occupancy", [("-(-registers * 32 // 256) * 256", "registers * 32")],
        r"occupancy\(96, 33, 0\) gave 20 blocks per SM, expected 16"),
    "occupancy with the register file as one pool, not 4 sub-partitions": (
        "07", "occupancy", "test_occupancy", [("16384 // per_warp * 4 // warps", "65536 // (warps * per_warp)")],
        r"occupancy\(96, 33, 0\) gave 17 blocks per SM, expected 16"),
    "tuning by the cost model only for want of a GPU": (
        "07", "tune_and_explain", "test_tune_softmax",
        [("rt.tune(problem, model=model, measure=False)", "rt.tune(problem, model=model)")], r"pass measure=False"),
}


def cells_of(notebook):
    """The code cells before the first answer (setup, imports, specs), the answers and the tests, by grade_id."""
    setup, answers, tests = [], {}, {}
    for cell in notebook.cells:
        flags = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code":
            continue
        if flags.get("solution"):
            answers[flags["grade_id"]] = re.sub(r" *### (BEGIN|END) SOLUTION\n?", "", cell.source)
        elif flags.get("grade"):
            tests[flags["grade_id"]] = cell.source
        elif not answers:
            setup.append(cell.source)
    return setup, answers, tests


def run(source: str, namespace: dict, path) -> None:
    """Run ``source`` as a cell would, from a file, so that the simulator can read a kernel's source."""
    path.write_text(source)
    exec(compile(source, str(path), "exec"), namespace)


@pytest.fixture(scope="module")
def notebooks():
    return {key: cells_of(nbformat.read(path, as_version=4)) for key, path in NOTEBOOKS.items()}


@pytest.mark.parametrize("wrong", WRONG_ANSWERS)
def test_a_plausible_wrong_answer_loses_the_mark_with_a_reason(wrong, notebooks, tmp_path):
    assignment, answer, test, changes, message = WRONG_ANSWERS[wrong]
    with simulated():
        namespace, test = changed_answer(notebooks, tmp_path, assignment, answer, test, changes)
        with pytest.raises(CheckFailed, match=message):
            run(test, namespace, tmp_path / "test.py")


# Right answers that differ from the solution, which the checks once refused (a student-path review, 2026-11-30).
RIGHT_ANSWERS = {
    "a fully masked row written as zeros without reading x again": (
        "05", "softmax_online_kernel", "test_softmax_online_passes",
        [("y[row, c] = math.exp(x[row, c] - m) * inverse",
          "y[row, c] = math.exp(x[row, c] - m) * inverse if l > float32(0) else float32(0)")]),
    "a tile count in integers, (K + TILE - 1) // TILE": (
        "03", "matmul_nt_kernel", "test_matmul_nt_tiled",
        [(NT_LOOP, "    for t in range((K + TILE - 1) // TILE):\n        k0 = t * TILE\n")]),
    "a transpose whose write is guarded against a's shape, read across": (
        "03", "transpose_kernel", "test_transpose",
        [("col0 + ty < out.shape[0] and row0 + tx < out.shape[1]",
          "row0 + tx < a.shape[0] and col0 + ty < a.shape[1]")]),
    "a scan whose threads load consecutive pairs, a[2t] and a[2t + 1] (GPU Gems 3)": (
        "02", "blelloch_scan_kernel", "test_blelloch_scan_once",
        [(SCAN_LOADS, "s[2 * t] = a[2 * t] if 2 * t < n else float32(0)\n"
                      "    s[2 * t + 1] = a[2 * t + 1] if 2 * t + 1 < n else float32(0)\n")]),
}


def changed_answer(notebooks, tmp_path, assignment, answer, test, changes) -> tuple[dict, str]:
    """The namespace after the setup cells and the solution's ``answer`` with ``changes``; the ``test`` cell."""
    setup, answers, tests = notebooks[assignment]
    source = answers[answer]
    for old, new in changes:
        assert source.count(old) == 1, f"the solution of {answer} changed: update this answer ({old!r})"
        source = source.replace(old, new)
    namespace = {}
    for k, cell in enumerate(setup):
        run(cell, namespace, tmp_path / f"setup_{k}.py")
    run(source, namespace, tmp_path / "answer.py")
    return namespace, tests[test]


@pytest.mark.parametrize("right", RIGHT_ANSWERS)
def test_a_right_answer_other_than_the_solution_keeps_the_mark(right, notebooks, tmp_path):
    with simulated():
        namespace, test = changed_answer(notebooks, tmp_path, *RIGHT_ANSWERS[right])
        run(test, namespace, tmp_path / "test.py")


EMPTY_KERNEL_ASSIGNMENTS = {**NOTEBOOKS, "04": ROOT / "solutions" / "04_conv_as_gemm" / "conv_as_gemm.ipynb",
                            "06": ROOT / "solutions" / "06_precision" / "precision.ipynb"}


def emptied(source: str) -> tuple[str, list[str]]:
    """``source`` with the body of each ``@cuda.jit`` kernel (not a device function) replaced by ``pass``."""
    tree = ast.parse(source)
    names = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any(ast.unparse(d) in ("cuda.jit", "jit") for d in node.decorator_list):
            node.body, _ = [ast.Pass()], names.append(node.name)
    return ast.unparse(tree), names


def empty_kernel_cases():
    for assignment, path in EMPTY_KERNEL_ASSIGNMENTS.items():
        _, answers, tests = cells_of(nbformat.read(path, as_version=4))
        for answer, source in answers.items():
            for kernel in emptied(source)[1]:
                for test, test_source in tests.items():
                    if re.search(rf"\b{kernel}\b", test_source):
                        yield pytest.param(assignment, answer, kernel, test, id=f"{assignment}-{test}-{kernel}")


@pytest.mark.parametrize("assignment, answer, kernel, test", list(empty_kernel_cases()))
def test_a_kernel_that_writes_nothing_fails_every_check_that_launches_it(assignment, answer, kernel, test, tmp_path):
    """No check in a test cell, visible or hidden, is passed by a kernel that does nothing (one whose expected
    values were all NaN took the NaN poison of an unwritten output for a result)."""
    setup, answers, tests = cells_of(nbformat.read(EMPTY_KERNEL_ASSIGNMENTS[assignment], as_version=4))
    namespace = {}
    with simulated():
        for k, cell in enumerate(setup):
            run(cell, namespace, tmp_path / f"setup_{k}.py")
        for name, source in answers.items():  # every answer, so that a test cell finds what else it uses
            run(emptied(source)[0] if name == answer else source, namespace, tmp_path / f"answer_{name}.py")
        for k, statement in enumerate(ast.parse(tests[test]).body):
            source = ast.get_source_segment(tests[test], statement)
            if re.search(rf"\b{kernel}\b", source):
                with pytest.raises(CheckFailed):
                    run(source, namespace, tmp_path / f"test_{k}.py")
            else:
                run(source, namespace, tmp_path / f"test_{k}.py")
