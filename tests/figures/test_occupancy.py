"""Blocks per SM from registers and shared memory, against worked cases of the occupancy calculator's rules."""

import pytest

from gpucourse.figures import SMS, blocks_per_sm
from on_a_slide import SMALLEST_TEXT, smallest_text


def test_small_blocks_are_capped_by_block_slots():
    occupancy = blocks_per_sm(SMS["H100"], threads=32, registers=16)
    assert occupancy.blocks == 32 and occupancy.limited_by == "block slots"
    assert occupancy.fraction == 0.5          # 32 warps of 64


def test_registers_are_given_per_warp_in_units_of_256():
    # 96 registers x 32 threads = 3072 per warp; 8 warps = 24 576 per block; 65 536 / 24 576 = 2 blocks
    t4 = blocks_per_sm(SMS["T4"], threads=256, registers=96)
    assert t4.blocks == 2 and t4.limited_by == "registers" and t4.fraction == 0.5
    h100 = blocks_per_sm(SMS["H100"], threads=256, registers=96)
    assert h100.blocks == 2 and h100.fraction == 0.25
    # 33 registers round up to 40 per thread (1280 per warp, 5 units of 256)
    assert blocks_per_sm(SMS["H100"], 256, 33).limits["registers"] == 65536 // (8 * 1280)


def test_shared_memory_counts_the_reserved_kilobyte_from_ampere_on():
    assert blocks_per_sm(SMS["T4"], 128, 32, shared_bytes=16 * 1024).limits["shared memory"] == 4
    assert blocks_per_sm(SMS["H100"], 128, 32, shared_bytes=16 * 1024).limits["shared memory"] == 228 // 17
    one_block = blocks_per_sm(SMS["A100"], 1024, 32, shared_bytes=100 * 1024)
    assert one_block.blocks == 1 and one_block.limited_by == "shared memory"


def test_full_occupancy_needs_few_registers():
    assert blocks_per_sm(SMS["T4"], 256, 32).fraction == 1.0
    full = blocks_per_sm(SMS["H100"], 256, 32)
    assert full.fraction == 1.0 and full.limited_by == "warps and registers"


def test_impossible_blocks_are_refused():
    with pytest.raises(ValueError, match="1024"):
        blocks_per_sm(SMS["H100"], 2048, 32)
    with pytest.raises(ValueError, match="255"):
        blocks_per_sm(SMS["H100"], 256, 300)
    with pytest.raises(ValueError, match="shared memory"):
        blocks_per_sm(SMS["T4"], 256, 32, shared_bytes=100 * 1024)


def test_occupancy_against_registers_steps_where_a_block_no_longer_fits():
    import matplotlib

    matplotlib.use("Agg")
    from gpucourse.figures.occupancy import draw_occupancy_vs_registers

    axis = draw_occupancy_vs_registers(SMS["H100"], 256, {"capped": 128}).axes[0]
    registers, occupancy = axis.lines[0].get_data()
    at = dict(zip(registers, occupancy))
    assert (at[128], at[129], at[64], at[65]) == (25.0, 12.5, 50.0, 37.5)  # 2 blocks of 8 warps, then 1; 4, then 3
    assert "128 registers, 2 blocks" in axis.get_legend().get_texts()[0].get_text()
    assert smallest_text(axis.figure)[0] >= SMALLEST_TEXT  # lecture 7's legend was 8 pt, 11 px on a slide
