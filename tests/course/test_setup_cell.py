"""The badge and the setup cell are rendered from pyproject.toml and rewritten in place."""

from pathlib import PurePosixPath

import nbformat
import pytest

from conftest import ROOT
from gpucourse.course.setup_cell import (
    MARKER, PLACEHOLDER, badge_cell, colab_url, first_code_cell, main, out_of_date, render, render_badge, render_cell,
    rewrite,
)


def pyproject_with(tmp_path, source: str):
    path = tmp_path / "pyproject.toml"
    path.write_text(f'[tool.gpucourse]\ninstall-source = "{source}"\ncolab-extra = "cu12"\n')
    return path


def test_render_installs_from_the_configured_source_or_else_from_the_wheel(tmp_path):
    source = render(pyproject_with(tmp_path, "git+https://github.com/me/course"))
    assert source.startswith(MARKER) and source.splitlines()[-1] == "gpucourse.show_device()"
    assert 'course = "gpucourse[cu12] @ git+https://github.com/me/course"' in source and ".whl" not in source
    wheel = render(pyproject_with(tmp_path, ""))
    assert '"gpucourse-*.whl"' in wheel and 'f"gpucourse[cu12] @ file://{where}"' in wheel and "git+" not in wheel
    assert render(ROOT / "pyproject.toml") in (source, wheel)
    for cell in (source, wheel, render_cell("", "")):
        compile(cell, "setup cell", "exec")


def test_the_placeholder_is_refused_and_no_source_gives_no_badge(tmp_path):
    notebook = PurePosixPath("lectures/x.ipynb")
    with pytest.raises(ValueError, match="placeholder"):
        render(pyproject_with(tmp_path, PLACEHOLDER))
    with pytest.raises(ValueError, match="placeholder"):
        render_badge(pyproject_with(tmp_path, PLACEHOLDER), notebook)
    assert render_badge(pyproject_with(tmp_path, ""), notebook) is None
    assert "github/me/course/blob/main/lectures/x.ipynb" in render_badge(
        pyproject_with(tmp_path, "git+https://github.com/me/course"), notebook)


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
    source = render_cell("git+https://github.com/me/course", "cu12")
    badge = render_badge(pyproject_with(tmp_path, "git+https://github.com/me/course"), PurePosixPath("lectures/x.ipynb"))
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

    wheel = render_cell("", "cu12")
    assert rewrite(old, wheel, None) and not rewrite(old, wheel, None)
    notebook = nbformat.read(old, as_version=4)
    assert badge_cell(notebook) is None and len(notebook.cells) == 3 and notebook.cells[1].source == wheel


def test_make_setup_cells_says_in_one_line_what_it_did_and_out_of_date_names_what_it_would_rewrite(
        tmp_path, monkeypatch, capsys):
    """`make setup-cells` said nothing when all was up to date; `out_of_date` (the student edition's check) lists
    the notebooks that disagree with install-source without touching them."""
    pyproject_with(tmp_path, "git+https://github.com/me/course")
    for name in ("lectures/a.ipynb", "lectures/b.ipynb", "assignments/01_x/x.ipynb"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), tmp_path / name)
    before = (tmp_path / "lectures/a.ipynb").read_text()
    assert out_of_date(tmp_path, ["lectures", "assignments"]) == [
        "lectures/a.ipynb", "lectures/b.ipynb", "assignments/01_x/x.ipynb"]
    assert (tmp_path / "lectures/a.ipynb").read_text() == before, "out_of_date only reads"

    monkeypatch.chdir(tmp_path)
    assert main(["lectures", "assignments"]) == 0
    said = capsys.readouterr().out.splitlines()
    assert len(said) == 1 and said[0].startswith("setup cells: rewrote 3 of 3 notebooks") and "commit" in said[0]
    assert out_of_date(tmp_path, ["lectures", "assignments"]) == []
    assert main(["lectures", "assignments"]) == 0
    assert capsys.readouterr().out == "setup cells: 3 notebooks up to date\n"

    pyproject_with(tmp_path, "")  # the wheel route: the badges go
    assert out_of_date(tmp_path, ["lectures"]) == ["lectures/a.ipynb", "lectures/b.ipynb"]
    pyproject_with(tmp_path, PLACEHOLDER)
    assert main(["lectures"]) == 1
    said = capsys.readouterr()
    assert said.out == "" and said.err.startswith("error: install-source is") and len(said.err.splitlines()) == 1
