"""Claims a lecture's prose makes about what its cells print (on the CPU, the cost model's predictions): the prose
is written once, the model changes, so each such claim is checked on the executed lecture (shared with the other
lecture tests: no extra run)."""

import re

import pytest

from conftest import ROOT

LECTURES = sorted((ROOT / "lectures").glob("*.ipynb"))


def outputs(cell) -> str:
    return "".join(out.get("text", "") or out.get("data", {}).get("text/markdown", "") for out in cell.outputs)


def code_cell(notebook, marker: str):
    return next(c for c in notebook.cells if c.cell_type == "code" and marker in c.source)


def test_tuning_lecture_bert_puzzle_shows_the_gain_its_text_explains(executed_lecture):
    """Section 8's prose: version 2 changes next to nothing for training, and for serving takes 64 x 64 tiles of
    4 x 8 with BK 16 in place of version 1's 128 x 64 with BK 8 (half the tiles along K, so half a lone block's
    waits); its puzzle's answer is "serving". A model that priced both workloads the same once made the puzzle mark that
    answer wrong (review of 2026-11-30)."""
    notebook = executed_lecture(ROOT / "lectures" / "07_tuning.ipynb")
    table = outputs(code_cell(notebook, 'display(Markdown(f"{how} {table}"))'))
    assert "Version 1: 128x64 / 4x8, BK 8." in table, table
    training, serving = (float(gain) for gain in re.findall(r"\*\* \(([\d.]+)x\) \|", table))
    assert training < 1.01 < 1.2 < serving, table
    picks = [row.split(" | ")[3] for row in table.splitlines() if row.startswith("| 128 tokens |") and "all" not in row]
    assert picks == ["64x64 / 4x8, BK 16"] * 4, table
    text = next(text for text in (" ".join(c.source.split()) for c in notebook.cells if c.cell_type == "markdown")
                if "Serving one sequence" in text)
    assert "1's 128 × 64 tiles" in text and "64 × 64 tiles with BK = 16" in text, text


def test_tuning_lecture_names_the_close_prices_its_text_explains(executed_lecture):
    notebook = executed_lecture(ROOT / "lectures" / "07_tuning.ipynb")
    printed = outputs(code_cell(notebook, "rt.tune(problem, model=ft.cost_model"))
    count, tiles = re.search(r"(\d+) candidates within 10% of that price \(tiles of ([^)]*)\)", printed).groups()
    assert int(count) > 1, printed  # the text: "At the top the prices are close"
    text = next(text for text in (" ".join(c.source.split()) for c in notebook.cells if c.cell_type == "markdown")
                if "within 10% of the best" in text)
    named = re.search(r"within 10% of the best \(tiles of ([^)]*)\)", text)[1]
    assert sorted(re.findall(r"\d+ × \d+", named)) == sorted(t.replace(" x ", " × ") for t in tiles.split(", "))


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_a_prediction_left_unanswered_shows_nothing_of_the_answer(executed_lecture, path):
    """A "Your turn" cell run with ``my_guess = None`` prints only that it is not answered yet: no measurement, table
    or count that gives the answer away before the student guessed (a review found three that did)."""
    notebook = executed_lecture(path)
    for cell in notebook.cells:
        if cell.cell_type == "code" and re.search(r"^my_guess = None", cell.source, re.M):
            shown = [out for out in cell.outputs if out.get("output_type") != "stream" or out.get("text", "").strip()]
            assert [out.get("text", "").strip() for out in shown] == [
                "Not answered yet: write your prediction in place of None, then run this cell again."], cell.source
