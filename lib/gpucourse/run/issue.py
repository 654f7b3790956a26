"""How many instructions a launch issues, per pipe, without a GPU: the kernel's SASS with its line table, weighed
by the simulator's trace of the launch.

A GPU issues each instruction of a loop once per pass of a warp through the loop; the SASS says which
instructions each loop holds, not how often it runs. The trace does: it counts the warp memory instructions of
every source line (`simulator.trace.LaunchTrace.kernel_lines`, as the line table has them: a device function's
of the kernel's file at its own lines, another file's at the kernel's line that calls it). A loop's passes are
those of its memory instructions:
the warp instructions the trace counts at one's line and kind, over that line's copies in the loop (the most of
them, for a load in a branch may not run). Where a line's loads or stores sit in several loops, those holding
the most copies take its passes: an unrolled loop (4 copies), not its remainder (1). A loop with no memory
instruction runs as often as the loop around it; code outside loops once per warp. The instructions of a line
that no thread ran (`LaunchTrace.lines_not_run`: a branch none took, a vectorised kernel's scalar path, a device
function never called) count for nothing.

Where it is wrong: a loop's last passes that the compiler peeled count as its own; the trace's accesses that
the compiler keeps in registers find no instruction (they count for nothing); code the compiler moved to a line
that did not run counts for nothing, and a line that runs at full size but not in a smaller traced launch too;
a device function of another file is counted whole wherever it is called (both sides of its branches).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from .sass import _NESTED, instructions, loop_spans, source_lines, waits, with_nested

# SASS memory instructions -> (space, kind) as the trace counts them; LD and ST: generic addresses, global here
MEMORY = {"LDG": ("global", "read"), "LD": ("global", "read"), "STG": ("global", "write"), "ST": ("global", "write"),
          "ATOMG": ("global", "atomic"), "ATOM": ("global", "atomic"), "RED": ("global", "atomic"),
          "REDG": ("global", "atomic"), "LDS": ("shared", "read"), "STS": ("shared", "write"),
          "ATOMS": ("shared", "atomic")}
# the pipes of an SM with a rate of their own (NVIDIA's account of Volta to Hopper: the FMA pipe runs FP32
# arithmetic and integer multiply-adds, these in its heavy half only; the ALU integer add, logic, shifts, compares,
# selects and moves), each instruction counted in every pipe it occupies; the rest take only their issue slot.
# Rates: `figures.tuning.pipe_rates`, from the Programming Guide's throughput table
PIPES = {
    "fma": {"FFMA", "FADD", "FMUL", "FSWZADD", "IMAD", "IDP"},
    "imad": {"IMAD", "IDP"},
    "alu": {"IADD3", "LOP3", "SHF", "ISETP", "SEL", "LEA", "FSETP", "FMNMX", "FSEL", "IMNMX", "PRMT", "VIADD",
            "IABS", "PLOP3", "BMSK", "SGXT", "IADD", "ISCADD", "LOP", "SHL", "SHR", "FLO", "POPC", "MOV"},
    "special": {"MUFU", "F2F", "F2I", "I2F", "F2FP", "I2FP", "FRND"},  # exp2, rcp, ...; conversions
    "fp64": {"DFMA", "DADD", "DMUL", "DSETP", "DMNMX"},
    "shuffle": {"SHFL"},
}
_PIPES_OF = {opcode: tuple(pipe for pipe, opcodes in PIPES.items() if opcode in opcodes)
             for opcodes in PIPES.values() for opcode in opcodes}


def pipes_of(opcode: str) -> tuple[str, ...]:
    """The pipes SASS ``opcode`` occupies (``"IMAD.WIDE"``: ``("fma", "imad")``); none for one that takes an issue
    slot only."""
    return _PIPES_OF.get(opcode.split(".")[0], ())


@dataclass(frozen=True)
class Part:
    """A loop's own instructions (not those of the loops inside it), or the code outside every loop."""

    parent: int | None  # its index among `IssueCode.parts` of the loop around it, or of the code outside every
    # loop (the last part); None for that last part
    # (file, line, space, kind) of the loads and stores that count its passes, each with what divides the trace's
    # count of that line and kind into passes: its copies here, times the loops that hold as many
    counters: tuple
    by_line: dict  # (file, line), or None before the line table's first line -> its instructions here, per pipe
    # and in all ("issue"), and its instructions that wait for global loads ("round_trips": `sass.waits`)


@dataclass(frozen=True)
class IssueCode:
    """A kernel's SASS read for `issued`: its loops' instructions and the lines of their loads and stores."""

    parts: tuple[Part, ...]  # the loops, then the code outside them

    def issued(self, kernel_lines: dict, warps: int, scale: float = 1.0, not_run=frozenset()) -> Counter:
        """Warp instructions a launch of ``warps`` warps issues, per pipe and in all (``"issue"``), and its warps'
        waits for global loads (``"round_trips"``), from the trace's ``kernel_lines`` (`LaunchTrace.kernel_lines`)
        of it, or of a launch of the same kernel that did 1 / ``scale`` of its work (its loops then run ``scale``
        times as often; the code outside them runs once per warp all the same), none from the lines ``not_run``
        (`LaunchTrace.lines_not_run`): see the module's docstring."""
        passes: list[float | None] = []
        for part in self.parts[:-1]:
            seen = [scale * kernel_lines.get(key, 0) / divisor for key, divisor in part.counters]
            passes.append(max(seen) if seen else None)
        passes.append(float(warps))  # the code outside every loop
        total = Counter()
        for k, part in enumerate(self.parts):
            here = k
            while passes[here] is None:  # no memory instruction of its own: as often as the loop around it
                here = self.parts[here].parent
            for line, counts in part.by_line.items():
                if line not in not_run:
                    for pipe, count in counts.items():
                        total[pipe] += count * passes[here]
        return total


def issue_code(sass: str) -> IssueCode | None:
    """`IssueCode` of ``sass`` as ``nvdisasm -g`` prints it (with the line table); None when it has no line."""
    lines = source_lines(sass)
    if not any(lines):
        return None
    code = instructions(sass)
    spans = sorted(set(loop_spans(code)), key=lambda s: s[0] - s[1])  # the widest first: a parent before its loops
    owner = [len(spans)] * len(code)  # the part of each instruction; the last part: outside every loop
    for number, (first, last) in enumerate(spans):
        owner[first:last + 1] = [number] * (last - first + 1)
    parents = [next((p for p in range(k - 1, -1, -1) if spans[p][0] <= a and b <= spans[p][1]), len(spans))
               for k, (a, b) in enumerate(spans)] + [None]
    memory, by_line = [Counter() for _ in parents], [defaultdict(Counter) for _ in parents]
    for (_, opcode, _, _), line, part in zip(code, lines, owner):
        kind = opcode.split(".")[0]
        if kind == "NOP":
            continue
        by_line[part][line]["issue"] += 1
        by_line[part][line].update(pipes_of(opcode))
        if kind in MEMORY and line is not None:
            memory[part][(*line, *MEMORY[kind])] += 1
    # the waits for global loads: of each loop's own body per pass, of the code outside the loops read once
    bodies = [(with_nested(code, first, last, spans), True) for first, last in spans]
    bodies.append((with_nested(code, 0, len(code) - 1, [s for s in spans if s != (0, len(code) - 1)]), False))
    for part, (indices, steady) in enumerate(bodies):
        for k in waits([_NESTED if i is None else code[i] for i in indices], steady):
            by_line[part][lines[indices[k]]]["round_trips"] += 1
    # a line's loads or stores in several loops: those with the most copies take its passes (an unrolled loop,
    # not its remainder, which runs fewer passes than the unrolled loop holds copies, each time it is reached)
    most = Counter()
    for held in memory[:-1]:
        for key, copies in held.items():
            most[key] = max(most[key], copies)
    holders = Counter(key for held in memory[:-1] for key, copies in held.items() if copies == most[key])
    parts = [Part(parents[k], tuple((key, copies * holders[key]) for key, copies in memory[k].items()
                                    if copies == most[key]), dict(by_line[k]))
             for k in range(len(parents))]
    return IssueCode(tuple(parts))
