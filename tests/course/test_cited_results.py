"""What the course's texts cite from benchmarks/RESULTS.md is there: the section's date, and its numbers.

The texts: the lectures, the solutions' notebooks (the assignments are made from them) and the READMEs.

A citation is a date followed by ``section `name```: ``(NVIDIA H200, 2026-11-30, `benchmarks/RESULTS.md`
section `matmul`)``. When a GPU run records a section again, the lectures that quote the old run fail here
until their text follows the new one. Checked for each citation: the date is the section's (its `Date` line,
or a line of it that keeps rows of an earlier run, such as `fusion`'s attention rows). Checked for the sentence
that holds the citation, where it cites one section: each figure with a unit (ms, TFLOP/s, GB/s, TB/s, %) is
one of the section's, rounded as the text rounds it. Figures worked out from them (a ratio, a share of a
data-sheet peak) go in a sentence of their own.
"""

import re
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import nbformat
import pytest

from gpucourse.course.results import measured_on, recorded

ROOT = Path(__file__).resolve().parents[2]
TEXTS = [*sorted((ROOT / "lectures").glob("*.ipynb")), *sorted((ROOT / "solutions").rglob("*.ipynb")),
         ROOT / "README.md", ROOT / "benchmarks" / "README.md"]
DATE = re.compile(r"\d{4}-\d\d-\d\d")
SECTIONS = re.compile(r"sections? ((?:`\w+`(?:,? and |, | )?)+)")
FIGURE = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?) ?(ms|TFLOP/s|GB/s|TB/s|%)")
NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`*(])")


def citations(sentence: str):
    """(date, section names) for each date the sentence follows with ``section `name```, within 200 characters."""
    dates = list(DATE.finditer(sentence))
    for k, date in enumerate(dates):
        end = dates[k + 1].start() if k + 1 < len(dates) else len(sentence)
        named = SECTIONS.search(sentence, date.end(), min(end, date.end() + 200))
        if named:
            yield date.group(), re.findall(r"`(\w+)`", named.group(1))


def rounds_to(figure: str, unit: str, numbers: list[Decimal]) -> bool:
    """Whether a number of the section, in the figure's unit, rounds to the figure."""
    value = Decimal(figure.replace(",", ""))
    places = Decimal(1).scaleb(value.as_tuple().exponent)
    scale = Decimal(1000) if unit == "TB/s" else Decimal(1)  # the sections give GB/s
    return any((number / scale).quantize(places, ROUND_HALF_UP) == value for number in numbers)


def problems(sentence: str, section_text) -> list[str]:
    """What is wrong with the sentence's citations; ``section_text(name)``: the section's text, or None."""
    found, cited = [], set()
    for date, names in citations(sentence):
        for name in names:
            text = section_text(name)
            if text is None:
                found.append(f"section `{name}` is not in benchmarks/RESULTS.md")
            elif date not in text:
                found.append(f"section `{name}` has nothing of {date}: quote its run "
                             f"({measured_on(text) or 'its device and date not found'})")
            else:
                cited.add(name)
    if len(cited) == 1:
        name = cited.pop()
        numbers = [Decimal(n.replace(",", "")) for n in NUMBER.findall(section_text(name))]
        found += [f"{m.group(0)} is not in section `{name}`" for m in FIGURE.finditer(sentence)
                  if not rounds_to(m.group(1), m.group(2), numbers)]
    return found


def sentences(path: Path):
    """(where, sentence): a notebook's by cell, a Markdown file's as one part."""
    parts = ([(f"cell {i}", cell.source) for i, cell in enumerate(nbformat.read(path, as_version=4).cells)]
             if path.suffix == ".ipynb" else [("the file", path.read_text(encoding="utf-8"))])
    for where, text in parts:
        for paragraph in re.split(r"\n\s*\n", text):
            for sentence in SENTENCE_END.split(" ".join(paragraph.split())):
                yield where, sentence


@pytest.mark.parametrize("path", TEXTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_what_a_text_cites_from_the_results_is_there(path):
    wrong = [f"{where}: {problem}\n    in: {sentence[:300]}"
             for where, sentence in sentences(path) for problem in problems(sentence, recorded)]
    assert not wrong, "\n".join(wrong)


SECTION = ("`python benchmarks/matmul.py` on NVIDIA H200 (132 SMs).\n\n- Date: 2026-11-30\n"
           "| `matmul_tiled` | 4096^3 | 18.81 | 7.31 | 14% |\n| copy | 256 | 0.1288 | 4,168 | 100% |\n")


@pytest.mark.parametrize("sentence, said", [
    ("Measured: 7.31 TFLOP/s, 14% (NVIDIA H200, 2026-11-30, section `matmul`).", []),
    ("Measured: 18.8 ms and 4.2 TB/s (H200, 2026-11-30, `benchmarks/RESULTS.md` section `matmul`).", []),
    ("Measured: 7.32 TFLOP/s (NVIDIA H200, 2026-11-30, section `matmul`).",
     ["7.32 TFLOP/s is not in section `matmul`"]),
    ("Measured (NVIDIA H200, 2026-11-29, section `matmul`).", ["section `matmul` has nothing of 2026-11-29: quote its "
                                                               "run (on NVIDIA H200, 2026-11-30)"]),
    ("On 2026-11-30 (section `tuning`).", ["section `tuning` is not in benchmarks/RESULTS.md"]),
    ("A ratio of 3.2 TB/s worked out apart: no date, no section.", []),
])
def test_a_citation_is_checked_for_its_date_and_figures(sentence, said):
    assert problems(sentence, {"matmul": SECTION}.get) == said
