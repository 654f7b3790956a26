"""Read a kernel's SASS (the GPU's own instructions) without a GPU: nvJitLink assembles the PTX for an
architecture and NVIDIA's ``nvdisasm`` prints the cubin.

`nvdisasm` finds the disassembler on the PATH (the CUDA toolkit), else inside an installed package that carries
one: NVIDIA's wheel ``nvidia-cuda-nvdisasm`` (the course's ``cu13`` extra installs it) or Triton, without importing
either. `sass_counts` counts, in the printed text, what
`tuning.inspect_compiled` reports: global and shared loads by width, local memory traffic (LDL/STL) and, for the
main loop (the innermost loop, found by its backward branch, with the most FFMAs or tensor-core HMMAs), its
FFMAs, its instructions and its 64-bit integer instructions.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from .assembler import assemble

# (package, where its folder holds an nvdisasm): NVIDIA's wheel for CUDA 13 (`nvidia` is a namespace package), Triton
PACKAGED_NVDISASM = (("nvidia", ("cu13", "bin", "nvdisasm")), ("triton", ("backends", "nvidia", "bin", "nvdisasm")))

_INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+((?:@!?U?P[T\d]+\s+)?)([A-Z][A-Z0-9_.]*)([^;]*);")
_LABEL = re.compile(r"^\s*(\.L_x_\d+):", re.M)
_TARGET = re.compile(r"\(?(\.L_x_\d+)\)?")
# 64-bit integer work: wide multiplies, the high halves of 64-bit adds (.X: add with carry) and compares (.EX),
# 64-bit shifts, and the uniform datapath's equivalents
_INT64 = re.compile(r"^U?(?:IMAD\.WIDE|IMAD\.X|IADD3\.X|IADD\.64|LEA\.HI\.X|ISETP\..*\.EX|SHF\..*\.[SU]64)(?:\.|$)")


def nvdisasm() -> str | None:
    """The path of an ``nvdisasm`` that runs here: on the PATH, else one in an installed package
    (`PACKAGED_NVDISASM`, in that order), else None."""
    found = shutil.which("nvdisasm")
    if found:
        return found
    for package, place in PACKAGED_NVDISASM:
        try:
            spec = importlib.util.find_spec(package)  # finds the package's folders; does not import it
        except (ImportError, ValueError):
            continue
        for folder in (spec and spec.submodule_search_locations) or ():
            candidate = Path(folder).joinpath(*place)
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    return None


def sass_problem() -> str | None:
    """None when SASS can be read here, else why not."""
    if nvdisasm():
        return None
    return ("no nvdisasm: not on the PATH (the CUDA toolkit has it), nor from NVIDIA's wheel "
            "(`pip install nvidia-cuda-nvdisasm`; the course's cu13 extra installs it) or an installed Triton")


def disassemble(ptx: str, architecture: str, max_registers: int | None = None) -> str | None:
    """The SASS that nvJitLink assembles from ``ptx`` for ``architecture``, as ``nvdisasm`` prints it; None without
    an ``nvdisasm``."""
    tool = nvdisasm()
    if tool is None:
        return None
    _, cubin = assemble(ptx, architecture, max_registers)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "kernel.cubin"
        path.write_bytes(cubin)
        done = subprocess.run([tool, "-c", str(path)], capture_output=True, text=True, timeout=120)
    if done.returncode:
        raise RuntimeError(f"nvdisasm failed on the {architecture} cubin: {done.stderr.strip()[:300]}")
    return done.stdout


def instructions(sass: str) -> list[tuple[str, str, str, list[str]]]:
    """``(predicate, opcode, operands, labels before it)`` for each instruction of ``sass`` in order."""
    found, labels = [], []
    for line in sass.splitlines():
        label = _LABEL.match(line)
        if label:
            labels.append(label.group(1))
            continue
        m = _INSTRUCTION.search(line)
        if m:
            found.append((m.group(2).strip(), m.group(3), m.group(4).strip(), labels))
            labels = []
    return found


def innermost_loops(code: list) -> list[list]:
    """The bodies of the innermost loops of `instructions`' ``code``: from a label to a branch back to it, holding
    no other such loop."""
    where = {label: i for i, (*_, labels) in enumerate(code) for label in labels}
    loops = []
    for i, (_, opcode, operands, _) in enumerate(code):
        target = _TARGET.search(operands) if opcode.split(".")[0] in ("BRA", "UBRA") else None
        if target and target.group(1) in where and where[target.group(1)] <= i:
            loops.append((where[target.group(1)], i))
    # a branch back from code placed after an unconditional EXIT (an out-of-line slow path) is not a loop
    loops = [(a, b) for a, b in loops if not any(not p and op == "EXIT" for p, op, _, _ in code[a:b])]
    return [code[a:b + 1] for a, b in innermost(loops)]


def innermost(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The (start, end) spans of loops that hold no other of ``spans``, in order: the innermost loops (of SASS or
    of PTX)."""
    return sorted({(a, b) for a, b in spans if not any(a <= c and d <= b and (c, d) != (a, b) for c, d in spans)})


def _width(opcode: str) -> str:
    parts = opcode.split(".")
    return "128" if "128" in parts else "64" if "64" in parts else "32"


def sass_counts(sass: str) -> dict:
    """What `inspect_compiled` reports from SASS: ``LDG.128/64/32`` and ``LDS.128/64/32`` (32: a word or less),
    ``LDL``, ``STL``, and the main loop's ``loop_instructions``, ``loop_ffmas``, ``loop_mmas`` (HMMA: tensor-core
    instructions), ``loop_int64`` (64-bit integer instructions) and ``loop_global_loads`` (all 0 without a loop);
    ``loops``: those counts (`loop_counts`) of every innermost loop, in code order."""
    code = instructions(sass)
    counts = {f"{kind}.{w}": 0 for kind in ("LDG", "LDS") for w in ("128", "64", "32")}
    counts.update(LDL=0, STL=0)
    for _, opcode, _, _ in code:
        kind = opcode.split(".")[0]
        if kind in ("LDG", "LDS"):
            counts[f"{kind}.{_width(opcode)}"] += 1
        elif kind in ("LDL", "STL"):
            counts[kind] += 1
    loops = [loop_counts(body) for body in innermost_loops(code) if len(body) > 1]  # not the BRA-to-itself after EXIT
    main = max(loops, key=lambda c: (c["loop_ffmas"] + c["loop_mmas"], c["loop_instructions"]), default=loop_counts([]))
    counts.update(main, loops=loops)
    return counts


def loop_counts(body: list) -> dict:
    """Of one loop's ``body`` (a list of `instructions`): ``loop_instructions``, ``loop_ffmas``, ``loop_mmas``
    (HMMA), ``loop_int64`` (64-bit integer instructions) and ``loop_global_loads``."""
    kinds = [opcode.split(".")[0] for _, opcode, _, _ in body]
    return dict(loop_instructions=len(body), loop_ffmas=kinds.count("FFMA"), loop_mmas=kinds.count("HMMA"),
                loop_int64=sum(bool(_INT64.match(opcode)) for _, opcode, _, _ in body),
                loop_global_loads=kinds.count("LDG"))


def sass_findings(counts: dict) -> list[str]:
    """One plain-words line per SASS finding of `sass_counts`."""
    lines = ["SASS global loads: " + ", ".join(f"{counts[f'LDG.{w}']} LDG.{w}" for w in ("128", "64", "32")) +
             " (LDG.32: one word or less per thread and instruction)"]
    if any(counts[f"LDS.{w}"] for w in ("128", "64", "32")):
        lines.append("SASS shared loads: " + ", ".join(f"{counts[f'LDS.{w}']} LDS.{w}" for w in ("128", "64", "32")) +
                     ": a thread that reads neighbouring words of shared memory can take 4 in one LDS.128")
    if counts["LDL"] or counts["STL"]:
        lines.append(f"SASS local memory: {counts['LDL']} LDL and {counts['STL']} STL: loads and stores of off-chip "
                     "local memory (an array indexed at run time, or spilled registers)")
    else:
        lines.append("SASS local memory: no LDL or STL")
    n, f, mma = counts["loop_instructions"], counts["loop_ffmas"], counts["loop_mmas"]
    if n:
        work = f"{mma} HMMA (tensor-core) and {f} FFMA" if mma else f"{f} FFMA"
        lines.append(f"SASS main loop (the innermost loop with the most FFMA or HMMA): {work} in {n} instructions "
                     f"({(f + mma) / n:.0%}), {counts['loop_int64']} 64-bit integer instructions (IMAD.WIDE, the .X "
                     f"halves of 64-bit adds, .EX compares), {counts['loop_global_loads']} global loads; each "
                     "instruction that is not arithmetic takes an issue slot from it")
    return lines
