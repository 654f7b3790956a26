"""Lectures show recorded GPU results with their device and date, or a labelled prediction: never "nothing recorded"."""

import json
import re

import pytest

from conftest import ROOT
from gpucourse.course import results, show_recorded

SECTION = ("## Bandwidth\n\n`python benchmarks/bandwidth.py` on NVIDIA H100 80GB HBM3 (132 SMs, 50 MiB of L2).\n\n"
           "- Date: 2026-11-23\n\n| kernel | GB/s |\n|---|---:|\n| map | 3000 |")


def test_a_recorded_section_says_on_which_device_and_date_it_was_measured(tmp_path):
    path = tmp_path / "RESULTS.md"
    results.record("bandwidth", SECTION, path)
    shown = show_recorded("bandwidth", path, otherwise=lambda: pytest.fail("a recorded section is shown")).data
    assert shown.startswith("*Measured on NVIDIA H100 80GB HBM3, 2026-11-23 (`benchmarks/RESULTS.md`).*")
    assert shown.endswith(SECTION)


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
