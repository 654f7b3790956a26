"""What NVIDIA's assembler says of a kernel, with no GPU: registers per thread, local memory, shared memory.

`assembled` compiles the kernel to PTX for an architecture's compute capability (`ptx_for`), assembles it with
nvJitLink, asking its assembler for a report (``ptxas -v``): registers per thread, the stack frame (local
memory) and the bytes spilled to it. Shared memory is the sum of the PTX's ``.shared`` arrays (numba declares
them at module level, where the report does not count them). nvJitLink keeps a cache of its own on a machine
with a driver, and a cache hit reports nothing of the assembler: the course asks it not to cache
(``-no-cache``); the course keeps the report and the cubin instead, in the `compile_cache`, by the PTX, the
options and nvJitLink's version (`assemble`). A kernel that calls CUDA C++ numba-cuda links in (its float16
operators) is first linked with it, as a GPU's load links it (`linked_code`). `parse_report` reads the reports of
CUDA 12 and 13. `registers_per_block` is what a launch asks of the register file (the CPU backend refuses a block
past it, as a GPU does).

Without nvJitLink (a CUDA wheel of the cu12 or cu13 extra), `resources_problem` says why.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import re
from dataclasses import dataclass

from ..simulator.calls import called_device_functions
from . import compile_cache
from . import ptx as _ptx_check
from .linked_code import linked_ptx, needs_linking
from .ptx import compile_for_gpu


@dataclass(frozen=True)
class Resources:
    registers: int  # per thread
    shared_bytes: int  # static shared memory per block
    spilled_bytes: int  # stores to local memory when the registers run out
    architecture: str
    local_bytes: int = 0  # local memory per thread: the stack frame (spills, arrays indexed at run time)
    fma_share: float | None = None  # FMAs per instruction of the main loop (`tuning.main_loop_fma_share`), if known
    global_loads: object = None  # `sass.GlobalLoads` of the tile copy, where the SASS was read
    issue_code: object = None  # `issue.IssueCode`: the loops' instructions per pipe, where SASS with lines was read


def assemble(ptx: str, architecture: str, max_registers: int | None = None,
             line_table: bool = False) -> tuple[str, bytes]:
    """nvJitLink's assembler report (``ptxas -v``, never from its cache) and the cubin of ``ptx`` on ``architecture``,
    with at most ``max_registers`` registers per thread when given (what ``@cuda.jit(max_registers=...)`` asks);
    ``line_table``: the cubin keeps the source lines of PTX compiled with them (`lined_ptx`). Kept in the
    `compile_cache`: the same PTX is assembled once (a kernel's resources and its SASS are read again by a lecture,
    a grader and the tuner, in one process or in several: 0.1 s for an SGEMM, over 1 s for the warp-tiled conv)."""
    from cuda.bindings import nvjitlink

    key = compile_cache.Key(hashlib.sha256(repr(("nvJitLink assembly", tuple(nvjitlink.version()), architecture,
                                                 max_registers, line_table, ptx)).encode()).hexdigest(), {})
    kept = compile_cache.load(key)
    if kept is not None:
        return kept["report"], base64.b64decode(kept["cubin"])
    report, cubin = _assembled_now(ptx, architecture, max_registers, line_table)
    compile_cache.store(key, {"report": report, "cubin": base64.b64encode(cubin).decode()})
    return report, cubin


def _assembled_now(ptx: str, architecture: str, max_registers: int | None, line_table: bool) -> tuple[str, bytes]:
    from cuda.bindings import nvjitlink  # noqa: PLC0415

    cap = ([f"-maxrregcount={max_registers}"] if max_registers else []) + (["-lineinfo"] if line_table else [])
    for options in ([f"-arch={architecture}", "-Xptxas=-v", "-no-cache", *cap],
                    [f"-arch={architecture}", "-Xptxas=-v", *cap]):
        try:
            handle = nvjitlink.create(len(options), options)
        except nvjitlink.nvJitLinkError:  # an nvJitLink older than -no-cache (12.3 and before)
            continue
        try:
            data = ptx.encode()
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "kernel")
            nvjitlink.complete(handle)
            log = bytearray(nvjitlink.get_info_log_size(handle))
            nvjitlink.get_info_log(handle, log)
            cubin = bytearray(nvjitlink.get_linked_cubin_size(handle))
            nvjitlink.get_linked_cubin(handle, cubin)
        finally:
            nvjitlink.destroy(handle)
        return log.decode(errors="replace").rstrip("\x00"), bytes(cubin)
    raise RuntimeError(f"nvJitLink refused the options for {architecture}")


def resources_problem() -> str | None:
    """None when `kernel_resources` works here, else one line saying why not."""
    try:
        from cuda.bindings import nvjitlink  # noqa: F401
    except Exception as exc:  # ImportError, or a wheel without the library
        return f"register counts need nvJitLink (the course's cu12 or cu13 extra): {type(exc).__name__}: {exc}"
    return None


def launch_assembler() -> tuple[str, tuple[int, int]] | None:
    """(name, version) of the assembler that turns a launched kernel's code into the GPU's here: nvJitLink where
    numba-cuda links with it (``("nvJitLink", (13, 0))``), else the driver's own (its CUDA version); None with
    neither (no nvJitLink and no GPU). Assemblers differ where PTX leaves them room, and in their bugs."""
    try:
        from numba.cuda.cudadrv import driver  # noqa: PLC0415

        try:  # numba-cuda 0.30 links with cuda.core's Linker, which decides (True: the driver's cuLink)
            from cuda.core._linker import _decide_nvjitlink_or_driver  # noqa: PLC0415, PLC2701

            with_nvjitlink = not _decide_nvjitlink_or_driver()
        except ImportError:  # another cuda.core: what numba-cuda itself asks
            with_nvjitlink = driver._have_nvjitlink()  # noqa: SLF001
        if with_nvjitlink:
            from cuda.bindings import nvjitlink  # noqa: PLC0415

            return "nvJitLink", tuple(nvjitlink.version())
        return "the driver's", tuple(driver.driver.get_version())
    except Exception:  # noqa: BLE001 (no driver: no GPU, so nothing assembles launches)
        return None


def _entry_section(report: str) -> str:
    """The part of the report about the (first) entry function: device functions have their own lines."""
    start = re.search(r"Compiling entry function", report)
    if start is None:
        return report
    end = re.search(r"Compiling entry function", report[start.end():])
    return report[start.start(): start.end() + end.start() if end else len(report)]


def shared_bytes(ptx: str) -> int:
    """Static shared memory per block: the sum of the PTX's ``.shared`` arrays."""
    return sum(int(size) for size in re.findall(r"^\s*(?:\.visible\s+)?\.shared\s.*\[(\d+)\];", ptx, re.M))


def parse_report(report: str, ptx: str, architecture: str) -> Resources:
    """`Resources` from the assembler's verbose report (CUDA 12 or 13) and the PTX it assembled."""
    section = _entry_section(report)
    registers = re.search(r"Used (\d+) registers", section)
    if registers is None:
        raise ValueError("no register count in the assembler's report (was the PTX assembled at all? a cached "
                         f"link reports nothing of the assembler):\n{report}")
    stack = re.search(r"(\d+) bytes stack frame", section)
    spilled = re.search(r"(\d+) bytes spill stores", section)
    return Resources(int(registers.group(1)), shared_bytes(ptx), int(spilled.group(1)) if spilled else 0, architecture,
                     int(stack.group(1)) if stack else 0)


_own: dict = {}  # (py_func, argument types, launch bounds, compute capability) -> PTX


def compute_capability(architecture: str) -> tuple[int, int]:
    """``(9, 0)`` for ``"sm_90"``; a ValueError for anything else."""
    if not (isinstance(architecture, str) and re.fullmatch(r"sm_\d{2,3}", architecture)):
        raise ValueError(f"an architecture is a string such as 'sm_90' (an H100's), not {architecture!r}")
    digits = architecture.removeprefix("sm_")
    return int(digits[:-1]), int(digits[-1])


def ptx_for(dispatcher, argtypes, architecture: str) -> str:
    """The PTX that `kernel_resources` assembles for ``architecture``: compiled for its compute capability (and
    linked with the CUDA C++ numba-cuda links into it, where it calls some: `linked_code`)."""
    bounds = dispatcher.targetoptions.get("launch_bounds")
    cc = compute_capability(architecture)
    key = (dispatcher.py_func, tuple(argtypes))
    compiled = _ptx_check._compiled  # the PTX check's cache: a kernel already launched is not compiled again
    if bounds is not None or cc != _ptx_check.COMPUTE_CAPABILITY:
        # its own PTX: .maxntid and .minnctapersm decide how many registers the assembler may use, and code may
        # depend on the compute capability (`kernels.precision.mma_m16n8k16`: one instruction from sm_80 on)
        key, compiled = (*key, bounds, cc), _own
    if key not in compiled or (bounds is None and ".maxntid" in compiled[key]):  # another jit of it had bounds
        compiled[key] = compile_for_gpu(dispatcher, argtypes, cc)
    if needs_linking(compiled[key]):  # it calls numba-cuda's CUDA C++ (float16 operators): linked, as a GPU does
        return linked_ptx(dispatcher.py_func, tuple(argtypes), cc, bounds)
    return compiled[key]


def lined_ptx(dispatcher, argtypes, architecture: str) -> str | None:
    """`ptx_for`'s PTX with the source line of each instruction (numba-cuda's ``lineinfo``: the same code, its
    lines kept), for `sass.disassemble(..., line_table=True)`; None where the kernel is linked with CUDA C++ (its
    lines would be another file's) or where NVVM refuses the line table. Compiled as `_line_table` says: each
    line a line of the source, of the kernel's file, a device function's of that file at its own lines
    (`simulator.trace.LaunchTrace.kernel_lines` counts the accesses at the same lines). Kept in the
    `compile_cache` under a key of its own; the code without its table is kept as `ptx_for`'s compilation, where
    that is not yet compiled (`without_line_table`): a kernel is compiled once for both."""
    from numba import cuda  # noqa: PLC0415

    cc, bounds = compute_capability(architecture), dispatcher.targetoptions.get("launch_bounds")
    # not ptx_for's key; the file's path too: the line table names it (another copy of the course, the same
    # source elsewhere, must not read this one's lines)
    key = compile_cache.key(dispatcher.py_func, tuple(argtypes), cc,
                            ("line table", 4, bounds, dispatcher.py_func.__code__.co_filename))
    kept = key and compile_cache.load(key)
    if kept:
        return kept["ptx"]
    try:
        with _ptx_check.target_device(cc), _line_table(dispatcher.py_func):
            ptx, _ = cuda.compile_ptx(dispatcher.py_func, tuple(argtypes), cc=cc, lineinfo=True, launch_bounds=bounds)
    except Exception:  # noqa: BLE001 - NVVM's error; the same code compiles without its lines (ptx_for)
        return None
    _ptx_check.keep_compilation(dispatcher, argtypes, cc, without_line_table(ptx))
    if needs_linking(ptx):
        return None
    if key:
        compile_cache.store(key, {"ptx": ptx})
    return ptx


_LINE_TABLE = re.compile(r"^[ \t]*\.(?:loc|file)\b[^\n]*(?:\n|\Z)|^[ \t]*\.section[ \t]+\.debug_\w+\s*\{.*?^[ \t]*\}[ \t]*(?:\n|\Z)",
                         re.M | re.S)


def without_line_table(ptx: str) -> str:
    """``ptx`` compiled with ``lineinfo`` as it is compiled without: its ``.loc`` and ``.file`` directives and its
    ``.debug_*`` sections taken out (the code is the same; only the names numba numbers as it compiles differ)."""
    return _LINE_TABLE.sub("", ptx).rstrip()


_VARIABLE_LOCATION = re.compile(r'^\s*call void @"?llvm\.dbg\.(?:value|declare)"?\(.*$\n?', re.MULTILINE)


@contextlib.contextmanager
def _line_table(kernel):
    """numba-cuda 0.30's ``lineinfo`` compilation of ``kernel`` (a Python function), changed in three ways while it
    runs (under numba-cuda's compiler lock, so no other compilation sees them):

    - every line is the source's: numba-cuda shows a line above the kernel's `def` at the `def` (for the prologue),
      and so also the code of a device function written above the kernel that numba inlines (``inline="always"``:
      conv's ``pixel_chunk``), whose vector and scalar paths would then share one line;
    - the device functions the kernel calls (`called_device_functions`) are compiled again for this compilation,
      aside from the overloads their dispatchers keep (swapped back afterwards), those of the kernel's file with
      their lines: compiled without them, the code NVVM inlines from them would take the line of the call (a vector
      load and the scalar path beside it, at one line); another file's without, as before, but anew, so that none
      keeps an overload that links a helper compiled here with lines;
    - NVVM gets no locations of variables (``llvm.dbg.value``, ``llvm.dbg.declare``), only those of instructions:
      it refuses some (numba-cuda's for ``pixel_chunk``'s arguments: "Symbol name with unsupported characters").

    None changes the code NVVM generates: debug locations take no part in it."""
    from numba.cuda.core.compiler_lock import global_compiler_lock  # noqa: PLC0415
    from numba.cuda.cudadrv import nvvm  # noqa: PLC0415
    from numba.cuda.lowering import BaseLower  # noqa: PLC0415

    compile_ir, prologue = nvvm.compile_ir, BaseLower._adjust_line_if_prologue

    def without_variables(llvmir, **options):
        irs = [llvmir] if isinstance(llvmir, str) else llvmir
        return compile_ir([_VARIABLE_LOCATION.sub("", ir) for ir in irs], **options)

    with global_compiler_lock:
        file = kernel.__code__.co_filename
        functions = called_device_functions(kernel)
        kept = [(f.overloads, dict(f.targetoptions)) for f in functions]
        compiled_here = []
        try:
            nvvm.compile_ir, BaseLower._adjust_line_if_prologue = without_variables, lambda self, line: line
            for function in functions:
                function.overloads = type(function.overloads)()
                if function.py_func.__code__.co_filename == file:
                    function.targetoptions["lineinfo"] = True
            try:
                yield
            finally:
                compiled_here = [c for f in functions for c in f.overloads.values()]
        finally:
            nvvm.compile_ir, BaseLower._adjust_line_if_prologue = compile_ir, prologue
            for function, (overloads, options) in zip(functions, kept):
                function.overloads = overloads
                function.targetoptions.clear()
                function.targetoptions.update(options)
            for compiled in compiled_here:  # the target's entries of the compilations made here
                with contextlib.suppress(KeyError):
                    compiled.target_context.remove_user_function(compiled.entry_point)


def assembled(dispatcher, argtypes, architecture: str) -> Resources:
    """`Resources` of ``dispatcher`` for ``argtypes`` from the assembler's report on ``architecture``."""
    ptx = ptx_for(dispatcher, argtypes, architecture)
    return parse_report(assemble(ptx, architecture, max_registers(dispatcher))[0], ptx, architecture)


def max_registers(dispatcher) -> int | None:
    """The cap on registers per thread the kernel was compiled with (``@cuda.jit(max_registers=...)``), or None."""
    return dispatcher.targetoptions.get("max_registers") or None


REGISTER_UNIT = 256  # registers are given to a warp in units of 256 (CUDA's occupancy calculator)


def registers_per_block(registers: int, threads: int) -> int:
    """The registers a block of ``threads`` threads takes when each uses ``registers``: whole warps, each given
    ``registers`` x 32 rounded up to `REGISTER_UNIT`. A launch whose block takes more than the device's
    ``MAX_REGISTERS_PER_BLOCK`` (65,536) fails (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)."""
    per_warp = -(-registers * 32 // REGISTER_UNIT) * REGISTER_UNIT
    return -(-threads // 32) * per_warp


def checked_architecture() -> str:
    """``"sm_XY"`` of the GPU that launches on the simulator are checked for (`ptx.checked_for`; the T4 by default)."""
    return "sm_{}{}".format(*_ptx_check._check_cc)
