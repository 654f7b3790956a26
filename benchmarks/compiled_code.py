"""The compiled code of the ladders' top rungs for an H100 (sm_90), read on the CPU: no GPU, no timing.

    python benchmarks/compiled_code.py            # writes its section of RESULTS.md
    python benchmarks/compiled_code.py --print    # prints only
    python benchmarks/compiled_code.py --print flash   # the kernels whose label holds "flash"

For each kernel the benchmarks time at the top of a ladder (`_kernels`), numba-cuda compiles PTX for the argument
types the benchmarks launch it with; nvJitLink assembles it for sm_90 (registers, spills, stack frame and static
shared memory: its ``ptxas -v`` report), and nvdisasm prints the SASS that `gpucourse.run.sass` counts: global and
shared loads by width, local memory (LDL/STL), and each innermost loop that does 8 or more FFMA or HMMA (the
products), with its FFMA (HMMA) over all its instructions and its 64-bit integer instructions. Counts are of
instructions in the code, not executed; blocks per SM are what an H100's registers and shared memory allow
(`gpucourse.figures.occupancy.blocks_per_sm`). The narrative of each row (what changed and why) is in
benchmarks/README.md, "Compiled code of the top rungs"; what only a GPU can confirm is listed there too.

Needs nvJitLink (the cu12 or cu13 extra) and an nvdisasm (the cu13 extra installs NVIDIA's wheel of it): without
them it says which is missing and records nothing.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from common import cpu_machine, markdown_table, package_versions, today  # noqa: E402

NAME = "compiled_code"  # its section of benchmarks/RESULTS.md
ARCHITECTURE, GPU = "sm_90", "H100"
PRODUCT_LOOP = 8  # an innermost loop with at least this many FFMA or HMMA is a product loop


@dataclass(frozen=True)
class Kernel:
    label: str
    make: Callable[[], tuple]  # () -> (dispatcher, host arguments as a launch passes them, threads per block)


def _f32(*shape):
    return np.zeros(shape, np.float32)


def _f16(*shape):
    return np.zeros(shape, np.float16)


def _matmul(kernel):
    from gpucourse.kernels import matmul  # noqa: PLC0415

    return kernel, (_f32(1, 64, 64),) * 3, np.prod(matmul.configuration(kernel, (1, 4096, 4096))[1])


def _conv():
    from gpucourse.kernels import conv  # noqa: PLC0415

    kernel = conv.conv_implicit_gemm_warp_tiled  # NHWC y, x, w; stride, padding
    return kernel, (_f32(2, 8, 8, 64), _f32(2, 8, 8, 64), _f32(64, 3, 3, 64), 1, 1), \
        np.prod(conv.configuration(kernel, (32, 56, 56, 64))[1])


def _flash(**options):
    from gpucourse.kernels import fusion  # noqa: PLC0415

    kernel = fusion.make_flash2(64, **options)
    if options.get("split"):  # O_part, m_part, l_part, Q, K, V, causal
        arguments = (_f32(2, 1, 64, 64), _f32(2, 1, 64), _f32(2, 1, 64), *(_f32(1, 64, 64),) * 3, False)
    else:  # Q, K, V, O, causal
        arguments = (*(_f32(1, 64, 64),) * 4, False)
    return kernel, arguments, fusion.FLASH_THREADS


def _tensor_core(name):
    from gpucourse.kernels import precision  # noqa: PLC0415

    kernel = getattr(precision, name)
    return kernel, (_f32(64, 64), _f16(64, 64), _f16(64, 64)), np.prod(precision.configuration(kernel, (4096, 4096))[1])


def _softmax():
    from gpucourse.kernels import fusion  # noqa: PLC0415

    return fusion.softmax_registers, (_f32(4, 4096), _f32(4, 4096)), fusion.registers_threads(4096)


def _flat_softmax(name):
    """`softmax_vectorised` or `softmax_pipelined` on rows of 4096 columns, flattened as `launch_softmax` passes
    them."""
    from gpucourse.kernels import fusion  # noqa: PLC0415

    kernel = getattr(fusion, name)
    configure = fusion.vectorised_configuration if name == "softmax_vectorised" else fusion.pipelined_configuration
    return kernel, (_f32(4 * 4096), _f32(4 * 4096), 4096), np.prod(configure(16384, 4096)[1])


def _map():
    from bandwidth import double  # noqa: PLC0415 (the benchmark's own function)

    from gpucourse.kernels import elementwise  # noqa: PLC0415

    return elementwise.make_map_vectorised(double), (_f32(1024), _f32(1024)), elementwise.VECTOR_THREADS


def _kernels() -> list[Kernel]:
    from gpucourse.kernels import matmul, sgemm  # noqa: PLC0415

    return [
        Kernel("`matmul_register_tiled`", lambda: _matmul(matmul.matmul_register_tiled)),
        Kernel("`matmul_warp_tiled`", lambda: _matmul(sgemm.matmul_warp_tiled)),
        Kernel("`conv_implicit_gemm_warp_tiled`", _conv),
        Kernel("`attention_flash2` (d = 64)", _flash),
        Kernel("`attention_flash2`, 5 blocks per SM", lambda: _flash(blocks_per_sm=5)),
        Kernel("`attention_flash2_split`", lambda: _flash(split=True)),
        Kernel("`gemm_tensor_core_tiled`", lambda: _tensor_core("gemm_tensor_core_tiled")),
        Kernel("`gemm_tensor_core_async`", lambda: _tensor_core("gemm_tensor_core_async")),
        Kernel("`softmax_registers` (4096 columns)", _softmax),
        Kernel("`softmax_vectorised` (4096 columns)", lambda: _flat_softmax("softmax_vectorised")),
        Kernel("`softmax_pipelined` (4096 columns)", lambda: _flat_softmax("softmax_pipelined")),
        Kernel("`map_vectorised` (`2x`)", _map),
    ]


def problem() -> str | None:
    """Why the compiled code cannot be read here, or None."""
    from gpucourse.run import resources_problem, tuning  # noqa: PLC0415

    return resources_problem() or tuning.sass_problem()


def product_loops(loops: list[dict]) -> list[str]:
    """``FFMA / instructions (share), N 64-bit`` for each of ``loops`` (`sass_counts`' ``loops``) with `PRODUCT_LOOP`
    or more FFMA or HMMA."""
    found = []
    for c in loops:
        work = c["loop_ffmas"] + c["loop_mmas"]
        if work >= PRODUCT_LOOP:
            kind = f"{c['loop_mmas']} HMMA" if c["loop_mmas"] else f"{c['loop_ffmas']} FFMA"
            found.append(f"{kind} / {c['loop_instructions']} ({work / c['loop_instructions']:.0%}), "
                         f"{c['loop_int64']} 64-bit")
    return found


def measure(kernel: Kernel) -> list[str]:
    """The row of ``kernel``'s table."""
    from gpucourse.figures import SMS, blocks_per_sm  # noqa: PLC0415
    from gpucourse.run import tuning  # noqa: PLC0415

    dispatcher, arguments, threads = kernel.make()
    c = tuning.inspect_compiled(dispatcher, arguments, ARCHITECTURE)
    fit = blocks_per_sm(SMS[GPU], int(threads), c.registers, c.shared_bytes)
    loads = lambda kind: "/".join(str(c.sass[f"{kind}.{w}"]) for w in ("128", "64", "32"))  # noqa: E731
    return [kernel.label, str(int(threads)), str(c.registers), str(c.spilled_bytes), str(c.local_bytes),
            f"{c.shared_bytes / 1024:.1f}", str(fit.blocks), loads("LDG"), loads("LDS"),
            f"{c.sass['LDL']}/{c.sass['STL']}", "; ".join(product_loops(c.sass["loops"])) or "none"]


def tool_versions() -> str:
    from cuda.bindings import nvjitlink  # noqa: PLC0415

    from gpucourse.run import tuning  # noqa: PLC0415

    printed = subprocess.run([tuning.nvdisasm(), "--version"], capture_output=True, text=True).stdout
    disassembler = re.search(r"release ([\d.]+)", printed)
    return (f"{package_versions('numba', 'numba-cuda')}, nvJitLink {'.'.join(map(str, nvjitlink.version()))}, "
            f"nvdisasm {disassembler.group(1) if disassembler else '(version not printed)'}")


def section(rows: list[list[str]]) -> str:
    header = ["kernel", "threads", "registers", "spilled B", "stack B", "shared KiB", f"blocks per SM ({GPU})",
              "LDG 128/64/32", "LDS 128/64/32", "LDL/STL", "product loops: FFMA (HMMA) / instructions, 64-bit"]
    return "\n".join([
        f"## Compiled code of the top rungs ({ARCHITECTURE}, read on the CPU)",
        "",
        "`python benchmarks/compiled_code.py` (CPU only, no GPU involved; counts of instructions in the code, not "
        "executed, and no timing). The narrative of each row, and what only a GPU can confirm: benchmarks/README.md, "
        "\"Compiled code of the top rungs\".",
        "",
        f"- Machine: {cpu_machine()}",
        f"- Date: {today()}",
        f"- Versions: {tool_versions()}",
        f"- Each kernel compiled for the argument types its benchmark launches it with, assembled for {ARCHITECTURE} "
        "by nvJitLink (registers, spills, stack frame, static shared memory), its SASS printed by nvdisasm and "
        "counted by `gpucourse.run.sass`. Loads by width in bytes x 8 (32: a word or less per thread); product "
        f"loops: each innermost loop with {PRODUCT_LOOP} or more FFMA or HMMA, in code order.",
        "",
        markdown_table(header, rows, right=set(range(1, 7))),
    ])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--print", action="store_true", help="print the table; do not write RESULTS.md")
    parser.add_argument("only", nargs="*", help="only the kernels whose label holds one of these words")
    arguments = parser.parse_args(argv)
    why = problem()
    if why:
        print(f"compiled_code: cannot read the compiled code here: {why}. Nothing recorded.")
        return 1
    kernels = [k for k in _kernels() if not arguments.only or any(word in k.label for word in arguments.only)]
    if not kernels:
        print(f"compiled_code: no kernel's label holds {', '.join(arguments.only)}")
        return 1
    text = section([measure(kernel) for kernel in kernels])
    print(text)
    if not arguments.print and not arguments.only:
        from gpucourse.course import results  # noqa: PLC0415

        results.record(NAME, text)
        print(f"\nwritten to {results.RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
