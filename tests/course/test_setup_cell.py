"""The setup cell is rendered from pyproject.toml and rewritten in place."""

import nbformat

from conftest import ROOT
from gpucourse.course.setup_cell import MARKER, first_code_cell, render, rewrite


def test_render_uses_the_configured_source():
    source = render(ROOT / "pyproject.toml")
    assert source.startswith(MARKER)
    assert '%pip install --quiet "gpucourse[cu12] @ git+https://' in source
    assert source.splitlines()[-1] == "gpucourse.show_device()"


def test_rewrite_replaces_an_old_setup_cell_and_inserts_a_missing_one(tmp_path):
    source = render(ROOT / "pyproject.toml")
    old = tmp_path / "old.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Title"),
        nbformat.v4.new_code_cell(MARKER + " (outdated)\nimport gpucourse"),
        nbformat.v4.new_code_cell("x = 1"),
    ]), old)
    bare = tmp_path / "bare.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), bare)

    assert rewrite(old, source) and rewrite(bare, source)
    assert not rewrite(old, source), "a second run changes nothing"
    for path, cells in ((old, 3), (bare, 2)):
        notebook = nbformat.read(path, as_version=4)
        assert first_code_cell(notebook).source == source and len(notebook.cells) == cells
