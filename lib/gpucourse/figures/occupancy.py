"""Occupancy: how many blocks of a kernel an SM holds at once, from its registers and shared memory.

An SM keeps the registers and shared memory of every block it runs. A block is admitted
only when the SM has room for all of it, so four budgets cap the blocks per SM: warps
(threads), the block slots, the register file, and shared memory. `blocks_per_sm` applies
the rules of NVIDIA's occupancy calculator (``cuda_occupancy.h``): registers are given out per
warp in units of 256, from one of the SM's 4 sub-partitions, each a quarter of the register
file (a warp's registers never straddle two); shared memory per block in units of
``shared_unit`` bytes plus what the CUDA runtime reserves. *Occupancy* is the SM's resident warps over its maximum: the
theoretical figure of Nsight Compute, an upper bound of its *achieved occupancy*.

`SMS` holds the limits of the T4 (compute capability 7.5), A100 (8.0), H100 and H200 (9.0; the same chip), from the
CUDA C++ Programming Guide's table of technical specifications per compute capability.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

WARP = 32
REGISTER_UNIT = 256  # registers are allocated to a warp in units of 256
SUB_PARTITIONS = 4  # an SM's register file is split in 4; each warp's registers lie in one quarter


@dataclass(frozen=True)
class SM:
    name: str
    compute_capability: tuple[int, int]
    sms: int  # multiprocessors on the chip
    max_warps: int  # resident warps per SM (threads / 32)
    max_blocks: int  # resident blocks per SM
    registers: int  # 32-bit registers per SM
    shared_bytes: int  # shared memory per SM, at the largest carveout
    shared_per_block: int  # the most one block may use (above 48 KiB only by opting in, with dynamic shared memory)
    shared_reserved: int  # per block, taken by the CUDA runtime
    shared_unit: int  # allocation granularity
    max_registers_per_thread: int = 255
    max_threads_per_block: int = 1024
    fp32_lanes: int = 64  # FP32 results per clock per SM (the Programming Guide's throughput table): peak / 2 / this = clock
    # results per clock per SM of the other pipes in that table (`run.issue.PIPES`): 32-bit integer add, compare,
    # logic and shift (the ALU), and multiply-add (the FMA pipe's heavy half) alike; special functions (exp2, rcp)
    # and conversions; FP64; warp shuffles
    int32_lanes: int = 64
    special_lanes: int = 16
    fp64_lanes: int = 32
    shuffle_lanes: int = 32


SMS = {
    "T4": SM("T4", (7, 5), 40, 32, 16, 65536, 64 * 1024, 64 * 1024, 0, 256, fp64_lanes=2),
    "A100": SM("A100", (8, 0), 108, 64, 32, 65536, 164 * 1024, 163 * 1024, 1024, 128),
    "H100": SM("H100 SXM", (9, 0), 132, 64, 32, 65536, 228 * 1024, 227 * 1024, 1024, 128, fp32_lanes=128,
               fp64_lanes=64),
}
SMS["H200"] = replace(SMS["H100"], name="H200 SXM")  # the H100's chip, with more and faster memory


@dataclass(frozen=True)
class Occupancy:
    blocks: int  # resident blocks per SM
    limits: dict  # budget -> the blocks it alone would allow
    warps: int  # resident warps per SM
    fraction: float  # warps / max_warps

    @property
    def limited_by(self) -> str:
        """The budget that runs out first (ties: all of them, joined by ' and ')."""
        return " and ".join(name for name, blocks in self.limits.items() if blocks == self.blocks)


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def blocks_per_sm(sm: SM, threads: int, registers: int, shared_bytes: int = 0) -> Occupancy:
    """Blocks of ``threads`` threads, ``registers`` per thread and ``shared_bytes`` per block that fit on one SM."""
    if not 0 < threads <= sm.max_threads_per_block:
        raise ValueError(f"a block has 1 to {sm.max_threads_per_block} threads, not {threads}")
    if registers > sm.max_registers_per_thread:
        raise ValueError(f"{registers} registers per thread: the most is {sm.max_registers_per_thread}")
    if shared_bytes > sm.shared_per_block:
        raise ValueError(f"{shared_bytes} bytes of shared memory per block: the {sm.name} allows {sm.shared_per_block}")
    warps = -(-threads // WARP)
    per_warp_registers = _round_up(max(registers, 1) * WARP, REGISTER_UNIT)
    warps_by_registers = sm.registers // SUB_PARTITIONS // per_warp_registers * SUB_PARTITIONS
    per_block_shared = _round_up(shared_bytes, sm.shared_unit) + sm.shared_reserved
    limits = {
        "warps": sm.max_warps // warps,
        "block slots": sm.max_blocks,
        "registers": warps_by_registers // warps,
        "shared memory": sm.shared_bytes // per_block_shared if per_block_shared else sm.max_blocks,
    }
    blocks = min(limits.values())
    return Occupancy(blocks, limits, blocks * warps, blocks * warps / sm.max_warps)


def draw_occupancy_vs_registers(sm: SM, threads: int, marked: dict | None = None, ax=None):
    """Occupancy of blocks of ``threads`` threads against their registers per thread (no shared memory), a step
    at every register count where a block no longer fits; ``marked``: label -> registers, drawn on the steps."""
    import matplotlib.pyplot as plt  # noqa: PLC0415

    registers = list(range(16, sm.max_registers_per_thread + 1))
    occupancy = [blocks_per_sm(sm, threads, r).fraction * 100 for r in registers]
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 3.2))
    ax.step(registers, occupancy, where="post", color="black", lw=1.5)
    for k, (label, r) in enumerate((marked or {}).items()):
        fit = blocks_per_sm(sm, threads, r)
        ax.plot(r, fit.fraction * 100, "osD^v"[k % 5], ms=8,
                label=f"{label}: {r} registers, {fit.blocks} block{'s' if fit.blocks != 1 else ''}")
    ax.set_xlabel("registers per thread")
    ax.set_ylabel("occupancy (% of warp slots)")
    ax.set_ylim(0, 105)
    ax.set_title(f"{sm.name}, blocks of {threads} threads: {sm.registers:,} registers per SM", fontsize=10)
    if marked:
        ax.legend(fontsize=10)
    ax.grid(True, color="0.9")
    return ax.figure
