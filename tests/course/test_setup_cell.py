"""The badge and the setup cell are rendered from pyproject.toml and rewritten in place."""

from pathlib import PurePosixPath

import nbformat
import pytest

from conftest import ROOT
from gpucourse.course.setup_cell import MARKER, badge_cell, colab_url, first_code_cell, render, render_badge, rewrite


def test_render_uses_the_configured_source():
    source = render(ROOT / "pyproject.toml")
    assert source.startswith(MARKER)
    assert 'course = "gpucourse[cu12] @ git+https://' in source
    assert source.splitlines()[-1] == "gpucourse.show_device()"


def test_colab_url_follows_the_github_source_and_sends_solutions_to_their_release():
    lecture, solution = PurePosixPath("lectures/03_matmul.ipynb"), PurePosixPath("solutions/03_matmul/matmul.ipynb")
    assert colab_url("git+https://github.com/me/course", lecture) == (
        "https://colab.research.google.com/github/me/course/blob/main/lectures/03_matmul.ipynb"
    )
    assert colab_url("git+https://github.com/me/course.git@fall", solution) == (
        "https://colab.research.google.com/github/me/course/blob/fall/assignments/03_matmul/matmul.ipynb"
    )
    with pytest.raises(ValueError, match="not git\\+https://github.com"):
        colab_url("git+https://gitlab.com/me/course", lecture)


def test_rewrite_replaces_old_cells_and_inserts_missing_ones(tmp_path):
    source = render(ROOT / "pyproject.toml")
    badge = render_badge(ROOT / "pyproject.toml", PurePosixPath("lectures/x.ipynb"))
    old = tmp_path / "old.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("[![Open In Colab](old)](old)"),
        nbformat.v4.new_markdown_cell("# Title"),
        nbformat.v4.new_code_cell(MARKER + " (outdated)\nimport gpucourse"),
        nbformat.v4.new_code_cell("x = 1"),
    ]), old)
    bare = tmp_path / "bare.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), bare)

    assert rewrite(old, source, badge) and rewrite(bare, source, badge)
    assert not rewrite(old, source, badge), "a second run changes nothing"
    for path, cells in ((old, 4), (bare, 3)):
        notebook = nbformat.read(path, as_version=4)
        assert badge_cell(notebook).source == badge and first_code_cell(notebook).source == source
        assert len(notebook.cells) == cells
