"""Read a kernel's SASS (the GPU's own instructions) without a GPU: nvJitLink assembles the PTX for an
architecture and NVIDIA's ``nvdisasm`` prints the cubin.

`nvdisasm` finds the disassembler on the PATH (the CUDA toolkit), else inside an installed package that carries
one: NVIDIA's wheel ``nvidia-cuda-nvdisasm`` (the course's ``cu13`` extra installs it) or Triton, without importing
either. `sass_counts` counts, in the printed text, what
`tuning.inspect_compiled` reports: global and shared loads by width, local memory traffic (LDL/STL) and, for the
main loop (the innermost loop, found by its backward branch, with the most FFMAs or tensor-core HMMAs), its
FFMAs, its instructions and its 64-bit integer instructions. `global_loads` reads, for the cost model, how the
loads that fill a tiled kernel's shared tiles wait on memory: which of them are in flight together, and which each
wait for the one before.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .assembler import assemble

# (package, where its folder holds an nvdisasm): NVIDIA's wheel for CUDA 13 (`nvidia` is a namespace package), Triton
PACKAGED_NVDISASM = (("nvidia", ("cu13", "bin", "nvdisasm")), ("triton", ("backends", "nvidia", "bin", "nvdisasm")))

_INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+((?:@!?U?P[T\d]+\s+)?)([A-Z][A-Z0-9_.]*)([^;]*);")
_LABEL = re.compile(r"^\s*(\.L_x_\d+):", re.M)
_SOURCE_LINE = re.compile(r'//## File "([^"]+)", line (\d+)')  # nvdisasm -g: the line table's entry
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


def disassemble(ptx: str, architecture: str, max_registers: int | None = None, line_table: bool = False) -> str | None:
    """The SASS that nvJitLink assembles from ``ptx`` for ``architecture``, as ``nvdisasm`` prints it; None without
    an ``nvdisasm``. ``line_table``: each instruction's source line annotated (`source_lines`), from PTX compiled
    with them (`assembler.lined_ptx`)."""
    waiting = start_disassembly(ptx, architecture, max_registers, line_table)
    return waiting and waiting()


def start_disassembly(ptx: str, architecture: str, max_registers: int | None = None,
                      line_table: bool = False) -> Callable[[], str] | None:
    """`disassemble`, begun: nvJitLink assembles now, and ``nvdisasm`` prints the cubin in another process (about
    half a second, most of it its own start), while this one goes on; the function returned waits for the SASS.
    None without an ``nvdisasm``."""
    tool = nvdisasm()
    if tool is None:
        return None
    _, cubin = assemble(ptx, architecture, max_registers, line_table)
    folder = Path(tempfile.mkdtemp(prefix="gpucourse-sass-"))
    path = folder / "kernel.cubin"
    path.write_bytes(cubin)
    process = subprocess.Popen([tool, "-c", *(["-g"] if line_table else []), str(path)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)

    def sass() -> str:
        try:
            out, err = process.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise RuntimeError(f"nvdisasm ran past 120 s on the {architecture} cubin") from None
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        if process.returncode:
            raise RuntimeError(f"nvdisasm failed on the {architecture} cubin: {err.strip()[:300]}")
        return out

    return sass


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


def source_lines(sass: str) -> list[tuple[str, int] | None]:
    """(file, line) of each instruction of `instructions`' ``sass`` as ``nvdisasm -g`` annotates it (None before
    the first annotation, or everywhere when the cubin has no line table)."""
    found, where = [], None
    for line in sass.splitlines():
        source = _SOURCE_LINE.search(line)
        if source:
            where = (source.group(1), int(source.group(2)))
        elif _INSTRUCTION.search(line):
            found.append(where)
    return found


def loop_spans(code: list) -> list[tuple[int, int]]:
    """(first, last) index of every loop of `instructions`' ``code``: from a label to a branch back to it."""
    where = {label: i for i, (*_, labels) in enumerate(code) for label in labels}
    loops = []
    for i, (_, opcode, operands, _) in enumerate(code):
        target = _TARGET.search(operands) if opcode.split(".")[0] in ("BRA", "UBRA") else None
        if target and target.group(1) in where and where[target.group(1)] <= i:
            loops.append((where[target.group(1)], i))
    # a branch back from code placed after an unconditional EXIT (an out-of-line slow path) is not a loop
    return [(a, b) for a, b in loops if not any(not p and op == "EXIT" for p, op, _, _ in code[a:b])]


def innermost_loops(code: list) -> list[list]:
    """The bodies of the innermost loops of `instructions`' ``code``: from a label to a branch back to it, holding
    no other such loop."""
    return [code[a:b + 1] for a, b in innermost(loop_spans(code))]


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


# -- the loads that fill shared tiles, for the cost model ------------------------------------------------------------
_REGISTER = re.compile(r"\bR(\d+)\b")
_NESTED = ("", "NESTED LOOP", "", [])  # stands for a loop nested in the one read (`round_trips`)


@dataclass(frozen=True)
class GlobalLoads:
    """How a thread's global loads outside the main loop wait on memory, in the *tile loop* (the innermost loop
    around the main loop that holds a barrier: load the tiles, sync, compute, sync) and in the loops nested in it
    other than the main loop (a copy loop the compiler kept rolled). A *round trip* is a wait for loads in flight:
    loads issued together share one; a load whose value is stored before the next load is issued waits alone."""

    tile_barriers: int  # BAR in the tile loop's own body (not in loops nested in it): per iteration
    tile_loads: int  # LDG there
    tile_round_trips: int  # waits for them per iteration
    inner_loads: int  # LDG in the nested copy loops' bodies
    inner_round_trips: int  # waits per iteration of those bodies
    inner_instructions: int


def waits(body: list, steady: bool = True) -> list[int]:
    """Indices in ``body`` (`instructions`, a loop nested in it as `_NESTED`) of the instructions that wait for
    global loads: one that reads a register a load in flight writes, after which all loads issued so far are taken
    as arrived (issued together, they arrive together). ``steady``: of a loop's body in the steady state (read
    twice, the second read's: a load at its end waits at the next start); else of code read once. A nested loop's
    time lets the loads before it arrive (a double-buffered kernel's prefetch)."""
    found, pending = [], set()
    for repeat in (0, 1) if steady else (1,):
        for k, (_, opcode, operands, _) in enumerate(body):
            if (opcode, operands) == _NESTED[1:3]:
                pending.clear()
                continue
            kind, registers = opcode.split(".")[0], [int(r) for r in _REGISTER.findall(operands)]
            stores = kind.startswith("ST") or kind in ("RED", "ATOM", "ATOMS", "ATOMG")
            if pending & set(registers if stores else registers[1:]):
                if repeat:
                    found.append(k)
                pending.clear()
            if kind == "LDG" and registers:  # LDG.E.64 and .128 write 2 and 4 registers
                pending.update(range(registers[0], registers[0] + int(_width(opcode)) // 32))
    return found


def round_trips(body: list) -> int:
    """Waits for global loads per pass of a loop's ``body`` in the steady state (`waits`)."""
    return len(waits(body))


def with_nested(code: list, first: int, last: int, spans: list) -> list[int | None]:
    """Indices of ``code[first:last + 1]`` in order, each outermost loop of ``spans`` inside it (other than one
    from ``first`` to ``last``) as one None (`_NESTED` in a body read by `waits`)."""
    found, i = [], first
    while i <= last:
        inside = [b for a, b in spans if a == i and (a, b) != (first, last) and b <= last]
        if inside:
            found.append(None)
            i = max(inside) + 1
        else:
            found.append(i)
            i += 1
    return found


def global_loads(sass: str) -> GlobalLoads | None:
    """`GlobalLoads` of ``sass``; None without a main loop inside a loop that holds a barrier."""
    code = instructions(sass)
    spans = loop_spans(code)
    inner = innermost(spans)
    if not inner:
        return None
    main = max(inner, key=lambda s: (sum(op.split(".")[0] in ("FFMA", "HMMA") for _, op, _, _ in code[s[0]:s[1] + 1]),
                                     s[1] - s[0]))
    around = sorted((s for s in spans if s[0] <= main[0] and main[1] <= s[1]
                     and any(op.startswith("BAR") for _, op, _, _ in code[s[0]:s[1] + 1])), key=lambda s: s[1] - s[0])
    if not around:
        return None
    tile = around[0]
    nested = [s for s in spans if tile[0] <= s[0] and s[1] <= tile[1] and s != tile]
    own = [_NESTED if i is None else code[i] for i in with_nested(code, *tile, nested)]  # the tile loop's body
    copies = [code[a:b + 1] for a, b in innermost(nested) if (a, b) != main
              and any(op.startswith("LDG") for _, op, _, _ in code[a:b + 1])]
    kinds = [op.split(".")[0] for _, op, _, _ in own]
    return GlobalLoads(kinds.count("BAR"), kinds.count("LDG"), round_trips(own),
                       sum(op.startswith("LDG") for body in copies for _, op, _, _ in body),
                       sum(round_trips(body) for body in copies), sum(len(body) for body in copies))
