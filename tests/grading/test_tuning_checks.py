"""Module 7's checks: right answers pass; each plausible wrong one fails with a message that says what is wrong."""

import hashlib
import json

import pytest
from numba import cuda, float32, int32, uint32, uint64

from gpucourse import simulated
from gpucourse.figures import tuning as ft
from gpucourse.figures.occupancy import SMS, blocks_per_sm
from gpucourse.grading import CheckFailed
from gpucourse.grading import tuning as gt
from gpucourse.kernels.vector import load4
from gpucourse.run import resources_problem
from gpucourse.run import tuning as rt

needs_nvjitlink = pytest.mark.skipif(resources_problem() is not None, reason="nvJitLink is not installed")
BOUNDARIES = [{"threads": t, "items": i, "stages": s} for t, i, s in [
    (1024, 4, 3), (1024, 4, 4), (1024, 8, 1), (1024, 9, 1), (32, 55, 1), (32, 56, 1), (1056, 1, 1), (0, 1, 1),
    (1024, 16, 1), (384, 32, 1), (384, 32, 2), (1056, 12, 1), (2048, 8, 1)]]


@pytest.fixture(autouse=True)
def on_the_simulator():
    with simulated():
        yield


def constraint_with(shared_ok=lambda b: b <= 49152, register_file=True, order=("threads", "shared", "registers"),
                    allowed=None, per_thread=True):
    def constraint(config):
        t, i, s = config["threads"], config["items"], config["stages"]
        regs = 32 + 4 * i
        broken = {"threads": t % 32 or not 32 <= t <= 1024, "shared": not shared_ok(4 * t * i * s),
                  "registers": (per_thread and regs > 255) or (register_file and regs * t > 65536)}
        for rule in order:
            if broken[rule]:
                return f"too many {rule}"
        return allowed

    return constraint


def test_the_constraint_check_passes_the_rules_and_fails_each_slip():
    gt.check_constraint(constraint_with(), BOUNDARIES)
    slips = {"allowed a config that cannot run": constraint_with(register_file=False),
             "rejected a config that can run": constraint_with(shared_ok=lambda b: b < 49152),
             "should name the first rule": constraint_with(order=("threads", "registers", "shared")),
             "return None": constraint_with(allowed=False)}
    for message, constraint in slips.items():
        with pytest.raises(CheckFailed, match=message):
            gt.check_constraint(constraint, BOUNDARIES)
    # a review (2026-12-02) was told '272 registers per thread, 17408 per block: more than the registers allow'
    with pytest.raises(CheckFailed, match=r"allowed a config that cannot run: 256 registers per thread: more than "
                                          r"255, the most a thread may have$"):
        gt.check_constraint(constraint_with(per_thread=False), BOUNDARIES)
    with pytest.raises(CheckFailed, match=r"allowed a config that cannot run: 68 registers per thread, 69632 per "
                                          r"block: more than the 65536 of an SM$"):
        gt.check_constraint(constraint_with(register_file=False), BOUNDARIES)
    with pytest.raises(CheckFailed, match="'threads' in the reason.*yours said 'too many shared'"):
        gt.check_constraint(constraint_with(order=("shared", "threads", "registers")), BOUNDARIES)

    def names_every_rule(config):
        return constraint_with()(config) and "too many threads, too much shared memory or too many registers"

    with pytest.raises(CheckFailed, match="no rule after it: not '(shared|registers)'"):
        gt.check_constraint(names_every_rule, BOUNDARIES)


def key_with(*, drop=(), sort_keys=True, keep=None):
    """The right key without the fields of ``drop``, or with ``keep[field](value)`` in place of a field's value."""
    def cache_key(kernel, shapes, dtypes, device, compute_capability, versions):
        fields = {"kernel": kernel, "shapes": shapes, "dtypes": [str(d) for d in dtypes], "device": device,
                  "compute_capability": list(compute_capability), "versions": versions}
        fields.update({field: part(fields[field]) for field, part in (keep or {}).items()})
        blob = json.dumps({k: v for k, v in fields.items() if k not in drop}, sort_keys=sort_keys)
        return hashlib.sha256(blob.encode()).hexdigest()

    return cache_key


def test_a_key_that_forgets_a_field_or_the_order_loses_marks():
    gt.check_cache_key(key_with())
    for field in ("device", "dtypes", "compute_capability", "versions", "shapes"):
        with pytest.raises(CheckFailed, match=f"only {field} changed"):
            gt.check_cache_key(key_with(drop=(field,)))
    with pytest.raises(CheckFailed, match="another order"):
        gt.check_cache_key(key_with(sort_keys=False))
    parts = {"compute_capability": lambda cc: cc[0], "shapes": lambda shapes: sorted(shapes.values()),
             "dtypes": sorted, "versions": lambda versions: versions["numba-cuda"]}
    for field, part in parts.items():  # a key that keeps only part of a field
        with pytest.raises(CheckFailed, match=f"only {field} changed"):
            gt.check_cache_key(key_with(keep={field: part}))

    def digits_run_together(kernel, shapes, dtypes, device, compute_capability, versions):
        sizes = "".join(str(size) for _, size in sorted(shapes.items()))
        return "-".join([kernel, sizes, *map(str, dtypes), device, str(compute_capability), str(versions)])

    with pytest.raises(CheckFailed, match="only shapes changed.*digits, written one after another"):
        gt.check_cache_key(digits_run_together)

    def salted(kernel, shapes, dtypes, device, compute_capability, versions):
        return str(hash(json.dumps([kernel, shapes, dtypes, device, compute_capability, versions], sort_keys=True)))

    with pytest.raises(CheckFailed, match="calls hash"):
        gt.check_cache_key(salted)
    with pytest.raises(CheckFailed, match="strings"):
        gt.check_cache_key(lambda *fields: tuple(fields))

    from gpucourse.run import tuning as rt

    def the_librarys(kernel, shapes, dtypes, device, compute_capability, versions):
        return rt.cache_key(kernel, shapes, dtypes, device, compute_capability, versions)

    with pytest.raises(CheckFailed, match="calls the library's cache_key: write the key yourself"):
        gt.check_cache_key(the_librarys)


def test_the_lookup_must_cost_nothing_on_a_hit_and_store_on_a_miss():
    def right(cache, key, tune):
        hit = cache.get(key)
        if hit is None:
            hit = tune()
            cache.put(key, hit)
        return hit

    def always_tunes(cache, key, tune):
        result = tune()
        cache.put(key, result)
        return result

    def truthy_hit(cache, key, tune):
        hit = cache.get(key)
        if not hit:
            hit = tune()
            cache.put(key, hit)
        return hit

    gt.check_cached_tune(truthy_hit)
    with pytest.raises(CheckFailed, match="a hit must cost no timing"):
        gt.check_cached_tune(truthy_hit, ({}, {"best": None}, {"best": {"BM": 32}}))

    def never_stores(cache, key, tune):
        return cache.get(key) or tune()

    last = {}

    def ignores_the_key(cache, key, tune):
        if "result" not in last:
            last["result"] = tune()
            cache.put(key, last["result"])
        return last["result"]

    gt.check_cached_tune(right)
    gt.check_cached_tune(right)  # again: a fresh cache, not the first check's file
    for message, lookup in {"a hit must cost no timing": always_tunes, "should store": never_stores,
                            "another key is a miss": ignores_the_key}.items():
        with pytest.raises(CheckFailed, match=message):
            gt.check_cached_tune(lookup)

    def unwritten(cache, key, tune):
        raise NotImplementedError()

    with pytest.raises(CheckFailed, match="not written yet"):
        gt.check_cached_tune(unwritten)


@cuda.jit
def moving_sum_registers(out, x, items):
    start = cuda.grid(1) * items
    if start < out.size:
        a, b, c = x[start], x[start + 1], x[start + 2]
        for j in range(items):
            i = start + j
            if i >= out.size:
                break
            d = x[i + 3]
            out[i] = a + b + c + d
            a, b, c = b, c, d


@cuda.jit
def moving_sum_in_local_memory(out, x, items):
    window = cuda.local.array(4, float32)
    start = cuda.grid(1) * items
    for k in range(3):
        if start + k < x.size:
            window[k] = x[start + k]
    for j in range(items):
        i = start + j
        if i < out.size:
            window[(j + 3) % 4] = x[i + 3]
            out[i] = window[0] + window[1] + window[2] + window[3]


@cuda.jit
def moving_sum_of_three(out, x, items):
    start = cuda.grid(1) * items
    for j in range(items):
        i = start + j
        if i < out.size:
            out[i] = x[i] + x[i + 1] + x[i + 2]


@cuda.jit
def moving_sum_running(out, x, items):  # adds one value and subtracts one: drifts by a rounding each step
    start = cuda.grid(1) * items
    if start < out.size:
        total = x[start] + x[start + 1] + x[start + 2] + x[start + 3]
        for j in range(items):
            i = start + j
            if i >= out.size:
                break
            out[i] = total
            if i + 4 < x.size:
                total += x[i + 4] - x[i]


@needs_nvjitlink
def test_the_moving_sum_is_graded_on_its_output_and_its_compiled_code():
    gt.check_moving_sum(moving_sum_registers, [1, 37, 200], items=4, threads=32)
    with pytest.raises(CheckFailed, match="still uses local memory: a 16-byte stack frame"):
        gt.check_moving_sum(moving_sum_in_local_memory, [37, 200], items=4, threads=32)
    with pytest.raises(CheckFailed, match=r"out\[0\] is .*expected .*float32 additions\)$"):
        gt.check_moving_sum(moving_sum_of_three, [37], items=4, threads=32)
    gt.check_moving_sum(moving_sum_registers, [500], items=64, threads=32, seed=3)
    with pytest.raises(CheckFailed, match="a running total that adds one and subtracts one drifts"):
        gt.check_moving_sum(moving_sum_running, [500], items=64, threads=32, seed=3)
    with pytest.raises(CheckFailed, match="not a kernel"):
        gt.check_moving_sum(moving_sum_registers.py_func, [37], items=4, threads=32)
    with pytest.raises(CheckFailed, match="(?s)over its budget: .*read `x` at most 7 times, but .* read it 16 times"):
        gt.check_moving_sum(moving_sum_without_a_window, [37, 200], items=4, threads=32)


@cuda.jit
def moving_sum_without_a_window(out, x, items):  # right, no local memory, but 4 loads per output
    start = cuda.grid(1) * items
    for j in range(items):
        i = start + j
        if i < out.size:
            out[i] = x[i] + x[i + 1] + x[i + 2] + x[i + 3]



@cuda.jit
def transpose_uint32(out, x):
    rows, cols = x.shape
    n = uint32(cols)
    for f in range(cuda.grid(1), rows * cols, cuda.gridsize(1)):
        r, c = uint32(f) // n, uint32(f) % n
        out[c, r] = x[r, c]


@cuda.jit
def transpose_stepping(out, x):  # divides once before the loop, then steps row and column
    rows, cols = x.shape
    r, c = cuda.grid(1) // cols, cuda.grid(1) % cols
    dr, dc = cuda.gridsize(1) // cols, cuda.gridsize(1) % cols
    while r < rows:
        out[c, r] = x[r, c]
        r, c = r + dr, c + dc
        if c >= cols:
            r, c = r + 1, c - cols


@cuda.jit
def transpose_int32(out, x):  # int32 operands: numba still divides in int64
    rows, cols = x.shape
    n = int32(cols)
    for f in range(cuda.grid(1), rows * cols, cuda.gridsize(1)):
        r, c = int32(int32(f) // n), int32(int32(f) % n)
        out[c, r] = x[r, c]


@cuda.jit
def transpose_by_rows(out, x):  # divides by the number of rows: right only for square matrices
    rows, cols = x.shape
    n = uint32(rows)
    for f in range(cuda.grid(1), rows * cols, cuda.gridsize(1)):
        r, c = uint32(f) // n, uint32(f) % n
        if r < rows and c < cols:
            out[c, r] = x[r, c]


@cuda.jit
def transpose_float32(out, x):  # a float32 division: exact only while the flat index is below 2**24
    rows, cols = x.shape
    for f in range(cuda.grid(1), rows * cols, cuda.gridsize(1)):
        r = int(float32(f) / float32(cols))
        out[f - r * cols, r] = x[r, f - r * cols]


@cuda.jit
def transpose_float64(out, x):  # f / cols is a float64 division, a long routine
    rows, cols = x.shape
    for f in range(cuda.grid(1), rows * cols, cuda.gridsize(1)):
        r = int(f / cols)
        out[f - r * cols, r] = x[r, f - r * cols]


@cuda.jit
def transpose_swapped(out, x):  # out[r, c]: the indices in x's order
    rows, cols = x.shape
    n = uint32(cols)
    for f in range(cuda.grid(1), rows * cols, cuda.gridsize(1)):
        r, c = uint32(f) // n, uint32(f) % n
        out[r, c] = x[r, c]


@needs_nvjitlink
def test_the_transpose_is_graded_on_its_output_and_its_divisions():
    for right in (transpose_uint32, transpose_stepping):
        gt.check_transpose(right, [(37, 29), (1, 1), (5, 64)], blocks=3, threads=32)
    with pytest.raises(CheckFailed, match="still divides 64-bit integers"):
        gt.check_transpose(transpose_int32, [(37, 29)], blocks=3, threads=32)
    for floating in (transpose_float32, transpose_float64):
        with pytest.raises(CheckFailed, match="divides in floating point in its innermost loop"):
            gt.check_transpose(floating, [(37, 29)], blocks=3, threads=32)
    with pytest.raises(CheckFailed, match=r"out\[\d+, \d+\] is .*expected x"):
        gt.check_transpose(transpose_by_rows, [(8, 8), (37, 29)], blocks=3, threads=32)
    with pytest.raises(CheckFailed, match="not a kernel"):
        gt.check_transpose(transpose_uint32.py_func, [(3, 2)], blocks=1, threads=32)
    with pytest.raises(CheckFailed, match=r"out is x's transpose, 29 x 37: x\[r, c\] goes to out\[c, r\]") as failed:
        gt.check_transpose(transpose_swapped, [(37, 29)], blocks=3, threads=32)
    assert "needs a guard" not in str(failed.value)

def occupancy_with(round_registers=True, warps=lambda t: -(-t // 32), reserved=1024, round_shared=128,
                   shared_per_sm=233472, sub_partitions=True):
    def occupancy(threads, registers, shared_bytes):
        w = warps(threads)
        per_warp = -(-registers * 32 // 256) * 256 if round_registers else registers * 32
        by_registers = 16384 // per_warp * 4 // w if sub_partitions else 65536 // (w * per_warp)
        limits = {"warps": 64 // w, "block slots": 32, "registers": by_registers,
                  "shared memory": shared_per_sm // max(1, -(-shared_bytes // round_shared) * round_shared + reserved)}
        limit = min(limits, key=limits.get)
        return limits[limit], limit

    return occupancy


OCCUPANCY_CASES = [(96, 33, 0), (100, 64, 0), (256, 64, 7000), (1024, 64, 0), (512, 32, 100000), (33, 20, 129),
                   (32, 16, 0), (64, 32, 48 * 1024), (64, 32, 46080), (64, 32, 7000), (64, 32, 114176),
                   (64, 32, 115712), (512, 16, 0)]


def test_occupancy_without_the_rounding_or_the_reserve_loses_marks():
    gt.check_occupancy(occupancy_with(), OCCUPANCY_CASES, H100)
    for wrong in (occupancy_with(round_registers=False), occupancy_with(warps=lambda t: t // 32 or 1),
                  occupancy_with(reserved=0), occupancy_with(round_shared=1),
                  occupancy_with(shared_per_sm=228000),  # 228 kB for 228 KiB
                  occupancy_with(shared_per_sm=227 * 1024),  # the most for one block, for the SM's
                  occupancy_with(sub_partitions=False)):  # the register file as one pool
        with pytest.raises(CheckFailed, match="blocks per SM, expected"):
            gt.check_occupancy(wrong, OCCUPANCY_CASES, H100)

    def says_warps_always(threads, registers, shared_bytes):
        return occupancy_with()(threads, registers, shared_bytes)[0], "warps"

    with pytest.raises(CheckFailed, match="limited by .*'warps', 'block slots', 'registers', 'shared memory'"):
        gt.check_occupancy(says_warps_always, OCCUPANCY_CASES, H100)
    with pytest.raises(CheckFailed, match="should be the function you defined, not a str"):
        gt.check_occupancy("occupancy", OCCUPANCY_CASES, H100)
    with pytest.raises(CheckFailed, match="compute the four limits yourself"):
        gt.check_occupancy(occupancy_from_the_library, OCCUPANCY_CASES, H100)
    with pytest.raises(CheckFailed, match="calls H100"):
        gt.check_occupancy(occupancy_from_the_reference, OCCUPANCY_CASES, H100)

    def pair_swapped(threads, registers, shared_bytes):
        return tuple(reversed(occupancy_with()(threads, registers, shared_bytes)))

    with pytest.raises(CheckFailed, match=r"the blocks come first, return \(blocks, limit\)"):
        gt.check_occupancy(pair_swapped, OCCUPANCY_CASES, H100)

    def divides_by_the_shared_bytes(threads, registers, shared_bytes):
        return 233472 // shared_bytes, "shared memory"

    with pytest.raises(CheckFailed, match=r"raised ZeroDivisionError: .* \(a block with no shared memory of its own "
                                          r"still takes the 1024 bytes the runtime reserves\)"):
        gt.check_occupancy(divides_by_the_shared_bytes, [(256, 32, 0)], H100)


def H100(threads, registers, shared_bytes):
    return blocks_per_sm(SMS["H100"], threads, registers, shared_bytes)


def occupancy_from_the_reference(threads, registers, shared_bytes):
    found = H100(threads, registers, shared_bytes)
    return found.blocks, found.limited_by.split(" and ")[0]


def occupancy_from_the_library(threads, registers, shared_bytes):
    from gpucourse.figures.occupancy import SMS, blocks_per_sm

    found = blocks_per_sm(SMS["H100"], threads, registers, shared_bytes)
    return found.blocks, found.limited_by.split(" and ")[0]


@needs_nvjitlink
def test_tuning_with_the_model_needs_the_whole_grid_and_the_picks_own_numbers():
    problem = gt.softmax_problem(256, 300, threads=(64, 256), traced=(2, 300))
    model = ft.cost_model("H100")

    def answer(budget=None, bound_by=None, waves=0, own_model=None):
        def tune_and_explain(problem, model):
            model = own_model or model
            result = rt.tune(problem, model=model, measure=False, budget=budget)
            picked = rt.prediction(problem, result.best, model)
            return result, bound_by or picked.bound_by, picked.waves + waves

        return tune_and_explain

    gt.check_tuned(answer(), problem, model)

    def model_only_for_want_of_a_gpu(problem, model):  # on a GPU, rt.tune would time the candidates
        result = rt.tune(problem, model=model)
        picked = rt.prediction(problem, result.best, model)
        return result, picked.bound_by, picked.waves

    with pytest.raises(CheckFailed, match=r"no GPU here to time it\): pass measure=False"):
        gt.check_tuned(model_only_for_want_of_a_gpu, problem, model)
    for message, wrong in {"waves": answer(waves=1), "bound_by": answer(bound_by="FLOPs"),
                           "whole grid": answer(budget=2),
                           r"the H100's\), not another": answer(own_model=ft.cost_model("A100"))}.items():
        with pytest.raises(CheckFailed, match=message):
            gt.check_tuned(wrong, problem, model)

    def unwritten(problem, model):
        raise NotImplementedError()

    with pytest.raises(CheckFailed, match="not written yet"):
        gt.check_tuned(unwritten, problem, model)


@cuda.jit
def row_sums_thread_zero(out, x):
    if cuda.threadIdx.x == 0:
        total = float32(0)
        for col in range(x.shape[1]):
            total += x[cuda.blockIdx.x, col]
        out[cuda.blockIdx.x] = total


@needs_nvjitlink
def test_a_row_sum_no_faster_than_the_reference_fails_and_says_how_it_was_scored():
    # one thread per row issues every load of its row, one after another: the cost model counts them
    with pytest.raises(CheckFailed, match=r"0\.\d\dx as fast as row_sums_chunked \(predicted for the H100 by the "
                                          r"cost model.*1\.5x\. The model finds yours bound by instruction issue "
                                          r"\(alu pipe\) \(row_sums_chunked by global memory\): issue fewer "
                                          r"instructions per element"):
        gt.check_row_sums_speed(row_sums_thread_zero, 128, [(5, 300)], at_least=1.5, model=ft.cost_model("H100"))
    with pytest.raises(CheckFailed, match="ROW_THREADS"):
        gt.check_row_sums_speed(row_sums_thread_zero, 100, [(5, 300)], at_least=1.5, model=ft.cost_model("H100"))


@cuda.jit(device=True)
def halving_tree_to(out, partial, total):
    """Block sum of each thread's ``total`` through ``partial`` (the block's size, a power of two) into ``out[row]``."""
    t, row = cuda.threadIdx.x, cuda.blockIdx.x
    partial[t] = total
    cuda.syncthreads()
    step = cuda.blockDim.x // 2
    while step > 0:
        if t < step:
            partial[t] += partial[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        out[row] = partial[0]


def make_row_sums(threads: int, chunked: bool):
    """A block per row, a halving tree over ``threads`` slots; each thread adds a contiguous chunk of the row
    (``chunked``, the reference's way) or every ``threads``-th value from its own (coalesced)."""

    @cuda.jit
    def row_sums(out, x):
        partial = cuda.shared.array(threads, float32)
        t = cuda.threadIdx.x
        chunk = (x.shape[1] + threads - 1) // threads
        first, stop, stride = (t * chunk, min((t + 1) * chunk, x.shape[1]), 1) if chunked else (t, x.shape[1], threads)
        total = float32(0)
        for col in range(first, stop, stride):
            total += x[cuda.blockIdx.x, col]
        halving_tree_to(out, partial, total)

    return row_sums


row_sums_halving_96 = make_row_sums(96, chunked=False)  # partial[32:48] never reach partial[0]
row_sums_small_chunks = make_row_sums(1024, chunked=True)  # 1024 threads: 4 floats each at 4096, uncoalesced


@cuda.jit
def row_sums_shared_sized_at_run_time(out, x):
    partial = cuda.shared.array(cuda.blockDim.x, float32)
    partial[cuda.threadIdx.x] = x[cuda.blockIdx.x, cuda.threadIdx.x]
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        out[cuda.blockIdx.x] = partial[0]


def test_the_row_sum_is_graded_by_the_cost_model_everywhere_and_a_gpus_timing_only_shown(monkeypatch):
    from gpucourse.run import device, timing

    model = ft.cost_model("H100")
    here, how_here, bounds = gt.row_sums_speedup(row_sums_small_chunks, 1024, model)
    assert how_here.startswith("predicted for the H100 by the cost model (8192 x 4096")
    times = iter([3e-3, 4e-3])  # the reference, then the kernel: measured 0.75x
    monkeypatch.setattr(device, "chosen_backend", lambda: type("GPU", (), {"on_gpu": True})())
    monkeypatch.setattr(timing, "median_seconds", lambda launch: next(times))
    on_gpu, how, _ = gt.row_sums_speedup(row_sums_small_chunks, 1024, model)
    assert bounds[0] in gt.BOUND_ADVICE and on_gpu == here and how.startswith(how_here) and how.endswith(": 0.75x (shown, not graded)")


def test_a_row_sum_faster_by_more_threads_but_uncoalesced_loses_the_mark():
    assert gt.row_sums_speedup(row_sums_small_chunks, 1024, ft.cost_model("H100"))[0] > 1.5  # the speed alone passes
    with pytest.raises(CheckFailed, match=r"warp reads of `x` touch 16\.0 sectors of 32 bytes each on average, more "
                                          r"than 4"):
        gt.check_row_sums_speed(row_sums_small_chunks, 1024, [(5, 300)], at_least=1.5, model=ft.cost_model("H100"))


def make_row_sums_vector(chunked: bool, dead_load: bool = False):
    """A block of 256 per row, 16-byte loads of x (`vector.load4`): neighbouring lanes, neighbouring vectors, or
    (``chunked``) a contiguous chunk per thread; ``dead_load``: scalar chunks and a vector load that never runs."""

    @cuda.jit
    def row_sums(out, x):
        partial = cuda.shared.array(256, float32)
        row, t = cuda.blockIdx.x, cuda.threadIdx.x
        total = float32(0)
        cols = x.shape[1] // 4 * 4
        if dead_load:
            chunk = (x.shape[1] + 255) // 256
            for col in range(t * chunk, min((t + 1) * chunk, x.shape[1])):
                total += x[row, col]
            if t == 4096:  # never: only its load in the PTX
                v = load4(x, (row, 0))
                total += v[0]
        else:
            per = cols // 256
            first, stop, step = (t * per, t * per + per, 4) if chunked else (4 * t, cols, 1024)
            for col in range(first, stop, step):
                v = load4(x, (row, col))
                total += v[0] + v[1] + v[2] + v[3]
            for col in range(cols + t, x.shape[1], 256):  # the last few columns, one at a time
                total += x[row, col]
        halving_tree_to(out, partial, total)

    return row_sums


def test_a_row_sum_with_vector_loads_is_traced_too():
    model = ft.cost_model("H100")
    gt.check_row_sums_speed(make_row_sums_vector(chunked=False), 256, [(5, 4096)], at_least=1.5, model=model)
    for wrong in (make_row_sums_vector(chunked=True), make_row_sums_vector(chunked=False, dead_load=True)):
        with pytest.raises(CheckFailed, match=r"warp reads of `x` touch \d+\.\d sectors of 32 bytes each on average, "
                                              r"more than (16|4)"):
            gt.check_row_sums_speed(wrong, 256, [(5, 4096)], at_least=1.5, model=model)


def test_a_row_sum_is_told_about_a_block_not_a_power_of_two_and_a_shared_array_sized_at_run_time():
    with pytest.raises(CheckFailed, match=r"96 threads is not a power of two, and halving it leaves partial sums out"):
        gt.check_row_sums_speed(row_sums_halving_96, 96, [(5, 300)], at_least=1.5, model=ft.cost_model("H100"))
    with pytest.raises(CheckFailed, match=r"cuda\.shared\.array needs a shape the compiler knows"):
        gt.check_row_sums_speed(row_sums_shared_sized_at_run_time, 128, [(5, 128)], at_least=1.5,
                                model=ft.cost_model("H100"))


@cuda.jit
def row_sums_atomic(out, x):  # adds to out, which the check fills with NaN (a GPU's memory is not zero either)
    total = float32(0)
    for col in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):
        total += x[cuda.blockIdx.x, col]
    cuda.atomic.add(out, cuda.blockIdx.x, total)


def test_a_row_sum_that_adds_to_its_output_is_told_the_output_starts_as_nan():
    with pytest.raises(CheckFailed, match=r"out\[0\] is nan \(the check fills the output with NaN before the launch: "
                                          r"never written, or added to\)"):
        gt.check_row_sums_speed(row_sums_atomic, 128, [(5, 300)], at_least=1.5, model=ft.cost_model("H100"))


@cuda.jit
def row_sums_in_float64(out, x):  # coalesced, but `total = 0.` sums in float64, which the cost model does not price
    partial = cuda.shared.array(128, float32)
    t = cuda.threadIdx.x
    total = 0.
    for col in range(t, x.shape[1], 128):
        total += x[cuda.blockIdx.x, col]
    halving_tree_to(out, partial, total)


def test_a_row_sum_in_float64_loses_the_mark():
    with pytest.raises(CheckFailed, match=r"row_sums_fast is correct but over its budget: computes in float64 on the GPU \(.*add\.f64"):
        gt.check_row_sums_speed(row_sums_in_float64, 128, [(5, 300)], at_least=1.5, model=ft.cost_model("H100"))


def make_column_sums(unsigned_loop, unsigned_column=False, rows_of=1):
    """A column sum; ``rows_of=0`` sums rows instead (a wrong answer)."""

    @cuda.jit
    def column_sums_unsigned(out, x):
        j = cuda.grid(1)
        if unsigned_column:
            j = uint64(j)
        if j < x.shape[rows_of]:
            total = float32(0)
            for i in range(uint64(x.shape[1 - rows_of]) if unsigned_loop else x.shape[1 - rows_of]):
                total += x[i, j] if rows_of else x[j, i]
            out[j] = total
    return column_sums_unsigned


def test_column_sums_puzzle_wants_an_unsigned_loop_index(capsys):
    from gpucourse.course import try_puzzle

    assert try_puzzle(gt.check_column_sums, make_column_sums(True))
    assert capsys.readouterr().out.startswith("✓ column_sums_unsigned: correct on 6 launches; its innermost loop: "
                                              "no sign test")
    with pytest.raises(CheckFailed, match="correct, but its innermost loop still tests the sign"):
        gt.check_column_sums(gt.column_sums)
    # the column alone is not enough, and uint64(j) < x.shape[0] compares in float64 (numba's uint64 and int64)
    with pytest.raises(CheckFailed, match=r"computes in float64 on the GPU \(.*setp\.geu\.f64.*numba also compares "
                                          r"and adds a uint64 and a signed integer in float64"):
        gt.check_column_sums(make_column_sums(False, unsigned_column=True))
    assert not try_puzzle(gt.check_column_sums, make_column_sums(True, rows_of=0))
    assert capsys.readouterr().out.startswith("✗ Not yet: column_sums_unsigned gave a wrong result")


@cuda.jit
def column_sums_from_row_1(out, x):
    j = cuda.grid(1)
    if j < x.shape[1]:
        total = float32(0)
        for i in range(uint64(1), uint64(x.shape[0])):
            total += x[i, j]
        out[j] = total


def test_column_sums_that_leave_out_the_first_row_are_told_the_loops_bounds():
    with pytest.raises(CheckFailed, match=r"(?s)gave a wrong result.*Each sum leaves out the first row: the loop over "
                                          r"the rows must run from 0 to rows - 1"):
        gt.check_column_sums(column_sums_from_row_1)
    with pytest.raises(CheckFailed) as failed:  # another wrong sum: no such hint
        gt.check_column_sums(make_column_sums(True, rows_of=0))
    assert "leaves out" not in str(failed.value)
