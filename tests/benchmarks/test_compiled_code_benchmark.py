"""benchmarks/compiled_code.py: the compiled code of the top rungs, read on the CPU, one row per kernel."""

import sys

import pytest

from conftest import ROOT
from gpucourse.course import results

sys.path.insert(0, str(ROOT / "benchmarks"))
import compiled_code  # noqa: E402

SAMPLE = ROOT / "tests" / "run" / "sass" / "sm_90_shared_product.sass"  # one loop of 4 FFMA per step


def test_every_top_rung_is_listed_once():
    labels = [kernel.label for kernel in compiled_code._kernels()]
    assert len(labels) == len(set(labels)) == 12
    assert any("matmul_warp_tiled" in label for label in labels) and any("flash2" in label for label in labels)
    assert any("softmax_pipelined" in label for label in labels)


def test_product_loops_are_the_innermost_loops_with_eight_ffma_or_more():
    from gpucourse.run import tuning

    sample = tuning.sass_counts(SAMPLE.read_text())["loops"]
    assert len(sample) == 1 and compiled_code.product_loops(sample) == []  # 4 FFMA: not a product loop
    ffma = "".join(f"        /*{0x20 + 16 * k:04x}*/                   FFMA R{k}, R20, R21, R{k} ;\n" for k in range(8))
    loop = (".L_x_0:\n" + ffma +
            "        /*00a0*/                   IADD3 R12, P0, R12, 0x4, RZ ;\n"
            "        /*00b0*/                   IMAD.X R13, RZ, RZ, R13, P0 ;\n"  # a 64-bit add's high half
            "        /*00c0*/                   ISETP.GE.U32.AND P1, PT, R12, R14, PT ;\n"
            "        /*00d0*/               @!P1 BRA `(.L_x_0) ;\n")
    assert compiled_code.product_loops(tuning.sass_counts(loop)["loops"]) == ["8 FFMA / 12 (67%), 1 64-bit"]


@pytest.mark.skipif(compiled_code.problem() is not None, reason="needs nvJitLink and nvdisasm (the cu13 extra)")
def test_a_row_read_off_the_compiled_code_and_nothing_recorded_with_print(capsys):
    before = results.RESULTS.read_bytes()
    assert compiled_code.main(["--print", "softmax_registers"]) == 0
    printed = capsys.readouterr().out
    row = next(line for line in printed.splitlines() if line.startswith("| `softmax_registers`"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[1] == "512" and int(cells[2]) <= 64 and cells[3] == cells[4] == "0"  # threads; registers; no spills
    assert cells[7].startswith("2/") and cells[9] == "0/0" and cells[10] == "none"  # two LDG.128, no local memory
    assert "nvdisasm 13." in printed and results.RESULTS.read_bytes() == before


def test_without_the_tools_or_a_kernel_it_says_so_and_records_nothing(monkeypatch, capsys):
    before = results.RESULTS.read_bytes()
    monkeypatch.setattr(compiled_code, "problem", lambda: "no nvdisasm: not on the PATH")
    assert compiled_code.main([]) == 1
    assert "cannot read the compiled code here: no nvdisasm" in capsys.readouterr().out
    monkeypatch.setattr(compiled_code, "problem", lambda: None)
    assert compiled_code.main(["--print", "no_such_kernel"]) == 1
    assert "no kernel's label holds no_such_kernel" in capsys.readouterr().out
    assert results.RESULTS.read_bytes() == before
