"""Lectures show recorded GPU results with their device and date, or a labelled prediction: never "nothing recorded"."""

import ast
import json
import re
import warnings

import pytest

from conftest import ROOT
from gpucourse.course import results, show_recorded

SECTION = ("## Bandwidth\n\n`python benchmarks/bandwidth.py` on NVIDIA H100 80GB HBM3 (132 SMs, 50 MiB of L2).\n\n"
           "- Date: 2026-11-23\n\n| kernel | GB/s |\n|---|---:|\n| map | 3000 |")


def test_a_recorded_section_says_on_which_device_and_date_it_was_measured(tmp_path):
    path = tmp_path / "RESULTS.md"
    results.record("bandwidth", SECTION, path)
    shown = show_recorded("bandwidth", path, otherwise=lambda: pytest.fail("a recorded section is shown")).data
    assert shown.startswith("*Measured on NVIDIA H100 80GB HBM3, 2026-11-23. Below: ")
    assert "the whole section: `benchmarks/RESULTS.md`, section `bandwidth`" in shown
    assert shown.endswith("| kernel | GB/s |\n|---|---:|\n| map | 3000 |")


def test_until_a_section_is_recorded_the_lecture_shows_what_it_passes_instead(tmp_path):
    path = tmp_path / "RESULTS.md"
    assert show_recorded("matmul", path, otherwise=lambda: "prediction") == "prediction"  # no results file
    results.record("bandwidth", SECTION, path)
    assert show_recorded("matmul", path, otherwise="prediction") == "prediction"


LECTURES = ["02a_tensors_map_zip", "02b_reduction_scan_roofline", "03_matmul"]


@pytest.mark.parametrize("name", LECTURES)
def test_lectures_that_show_gpu_speed_fall_back_on_a_labelled_prediction(name):
    cells = json.loads((ROOT / "lectures" / f"{name}.ipynb").read_text())["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    text = " ".join(" ".join("".join(c["source"]).split()) for c in cells if c["cell_type"] == "markdown")
    calls = re.findall(r"show_recorded\((.*)", code)
    assert calls and all("otherwise=lambda: show_prediction(" in call for call in calls), calls
    assert "**prediction, not a measurement**" in text and "sector" in text and "with the device and the date" in text


def lecture_views():
    """Every `show_recorded(...)` call in the lectures: (lecture, section, its keyword arguments but `otherwise`)."""
    for path in sorted((ROOT / "lectures").glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] != "code" or "show_recorded(" not in source:
                continue
            for node in ast.walk(ast.parse(source)):
                called = getattr(node, "func", None)
                if isinstance(node, ast.Call) and getattr(called, "id", getattr(called, "attr", "")) == "show_recorded":
                    choice = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg != "otherwise"}
                    yield path.stem, ast.literal_eval(node.args[0]), choice


@pytest.mark.parametrize("lecture, name, choice", list(lecture_views()), ids=lambda value: str(value)[:40])
def test_each_lecture_view_finds_its_table_in_the_recorded_results(lecture, name, choice):
    """The table, rows and columns a lecture names are in the recorded section (else the lecture warns), and it
    shows one table of a width a slide holds (the browser test measures it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        shown = show_recorded(name, **choice).data
    table = [line for line in shown.splitlines() if line.startswith("|")]
    note = shown.split("\n\n")[0]
    assert note.startswith("*Measured on NVIDIA ")
    assert note.endswith(f"the whole section: `benchmarks/RESULTS.md`, section `{name}`.*")
    assert table and shown.count("\n|---") == 1 and len(table[1].split("|")) - 2 <= 7, (lecture, table[:2])
