"""`make slides`: a deck must load everything it needs from files beside it, nothing from a CDN."""

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import nbformat

from gpucourse.course.slide_layout import CODE_BOX, CODE_LINE, SLIDE, TEXT_BOX, TEXT_LINE, _cut_code, cell_height, fit
from gpucourse.course.slides import main

CDN_HOSTS = re.compile(r"cdnjs|unpkg|jsdelivr|googleapis|gstatic|cdn\.|mathjax\.org|jquery\.com")


class References(HTMLParser):
    """Collects every src= and href= of a page, and the text of its inline scripts."""

    def __init__(self):
        super().__init__()
        self.urls, self.scripts, self._in_script = [], [], False

    def handle_starttag(self, tag, attrs):
        self.urls += [value for name, value in attrs if name in ("src", "href") and value]
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts.append(data)


def tiny_notebook(path: Path) -> None:
    notebook = nbformat.v4.new_notebook()
    cells = [
        (nbformat.v4.new_markdown_cell("# Squares\n\nThe square is $x^2$."), "slide"),
        (nbformat.v4.new_code_cell("print(2 ** 2)"), "fragment"),
        (nbformat.v4.new_markdown_cell("Say it slowly."), "notes"),
    ]
    for cell, kind in cells:
        cell.metadata["slideshow"] = {"slide_type": kind}
        notebook.cells.append(cell)
    nbformat.write(notebook, path)


def local_file(html: Path, url: str) -> Path:
    return html.parent / urlsplit(url).path


def test_deck_is_self_contained(tmp_path):
    src, out = tmp_path / "lectures", tmp_path / "slides"
    src.mkdir()
    tiny_notebook(src / "01_squares.ipynb")

    assert main([str(src), str(out), "--no-execute"]) == 0

    html = out / "01_squares.slides.html"
    assert html.is_file()
    text = html.read_text(encoding="utf-8")
    page = References()
    page.feed(text)

    remote = [u for u in page.urls if u.startswith(("http:", "https:", "//"))]
    assert not remote, f"the deck loads from the network: {remote}"
    for script in page.scripts:
        assert not re.search(r"https?://", script), f"an inline script names a URL: {script[:200]}"
    assert not CDN_HOSTS.search(text), f"a CDN is named: {CDN_HOSTS.search(text).group()}"
    assert not re.search(r"""(url\(|@import)\s*['"]?(https?:)?//""", text), "CSS loads from the network"

    local = [u for u in page.urls if not u.startswith(("#", "data:", "mailto:"))]
    missing = [u for u in local if not local_file(html, u).is_file()]
    assert not missing, f"referenced but not written: {missing}"
    for needed in ("reveal.js/dist/reveal.js", "reveal.js/dist/reveal.css", "reveal.js/plugin/notes/notes.js"):
        assert needed in local
    mathjax = [u for u in local if urlsplit(u).path.endswith("MathJax.js")]
    assert mathjax, "no MathJax entry script"
    assert (local_file(html, mathjax[0]).parent / "config" / "TeX-AMS-MML_HTMLorMML-full.js").is_file()
    assert r"$x^2$" in text  # left for MathJax to typeset in the browser

    theme = next(local_file(html, u) for u in local if "/theme/" in u)
    for imported in re.findall(r"""@import\s+url\(['"]?([^'")]+)""", theme.read_text()):
        assert not imported.startswith(("http", "//")) and (theme.parent / imported).is_file(), imported


def test_one_lecture_builds_its_own_deck_and_a_wrong_name_says_so(tmp_path, capsys):
    """`make slides L=01_squares`: the notebook alone, not its folder's others."""
    src, out = tmp_path / "lectures", tmp_path / "slides"
    src.mkdir()
    tiny_notebook(src / "01_squares.ipynb")
    tiny_notebook(src / "02_cubes.ipynb")
    assert main([str(src / "01_squares.ipynb"), str(out), "--no-execute"]) == 0
    assert sorted(p.name for p in out.glob("*.slides.html")) == ["01_squares.slides.html"]
    assert main([str(src / "03_missing.ipynb"), str(out), "--no-execute"]) == 1
    assert f"error: no notebook {src / '03_missing.ipynb'}" in capsys.readouterr().err


def test_slides_fill_a_1280_by_720_canvas_and_scroll(tmp_path):
    """What the browser tests check slide by slide, in the page's source (for machines without a browser)."""
    src, out = tmp_path / "lectures", tmp_path / "slides"
    src.mkdir()
    tiny_notebook(src / "01_squares.ipynb")
    assert main([str(src), str(out), "--no-execute"]) == 0
    text = (out / "01_squares.slides.html").read_text(encoding="utf-8")
    assert re.search(r"width: 1280,\s*height: 720,\s*center: false", text)
    assert re.search(r"\.reveal \.slides > section\.stack > section \{[^}]*overflow-y: auto", text)


def test_lectures_export_executed_with_their_figures(built_decks, root):
    """What `make slides` does: run every lecture, export it; widgets become a note."""
    for lecture in sorted((root / "lectures").glob("*.ipynb")):
        text = (built_decks / f"{lecture.stem}.slides.html").read_text(encoding="utf-8")
        page = References()
        page.feed(text)
        scripts = [u for u in page.urls if not u.startswith(("#", "data:"))]
        assert all(not u.startswith(("http:", "https:", "//")) for u in scripts if "reveal" in u or "MathJax" in u)
        assert 'src="data:image/png' in text, f"{lecture.name}: no figure in the deck"


def slide_types(notebook) -> list[str]:
    return [cell.metadata.get("slideshow", {}).get("slide_type", "-") for cell in notebook.cells]


def test_layout_starts_a_subslide_where_a_slide_would_overflow_and_keeps_explicit_types():
    paragraph = "A sentence that fills some of a line on the slide. " * 8  # about four lines
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("## Title")])
    notebook.cells += [nbformat.v4.new_markdown_cell(paragraph) for _ in range(12)]
    notebook.cells += [nbformat.v4.new_markdown_cell("Say it slowly."), nbformat.v4.new_markdown_cell("## Next")]
    for cell, kind in zip(notebook.cells, ["slide"] + ["-"] * 5 + ["fragment"] * 7 + ["notes", "slide"]):
        cell.metadata["slideshow"] = {"slide_type": kind}
    fit(notebook)
    kinds = slide_types(notebook)
    assert kinds[0] == "slide" and kinds[-2:] == ["notes", "slide"] and len(kinds) == 15
    assert 2 <= kinds.count("subslide") <= 4, kinds
    used = 0.0
    for cell, kind in zip(notebook.cells, kinds):
        used = cell_height(cell) if kind in ("slide", "subslide") else used + cell_height(cell)
        assert used <= SLIDE, kinds


def test_layout_splits_a_long_table_and_a_code_cell_with_a_long_output():
    rows = "\n".join(f"| {i} | {'word ' * 6} |" for i in range(60))
    table = nbformat.v4.new_markdown_cell(f"### Table\n\n| n | words |\n| --- | --- |\n{rows}")
    code = nbformat.v4.new_code_cell("\n".join(f"x{i} = {i}" for i in range(20)), outputs=[
        nbformat.v4.new_output("stream", name="stdout", text="line\n" * 200),
        nbformat.v4.new_output("stream", name="stdout", text="line\n" * 200),
    ])
    notebook = nbformat.v4.new_notebook(cells=[table, code])
    fit(notebook)
    tables = [cell for cell in notebook.cells if cell.cell_type == "markdown"]
    assert len(tables) >= 3 and tables[0].source.startswith("### Table\n\n| n | words |")
    assert all(cell.source.count("| n | words |") == 1 for cell in tables)
    assert [line for cell in tables for line in cell.source.splitlines() if re.match(r"\| \d+ \|", line)] == \
        rows.splitlines()
    source, *outputs = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert source.outputs == [] and [len(cell.outputs) for cell in outputs] == [1, 1]
    assert all(cell.metadata["transient"] == {"remove_source": True} for cell in outputs)
    assert len({cell.id for cell in notebook.cells}) == len(notebook.cells)
    assert all(kind in ("-", "subslide") for kind in slide_types(notebook))
    assert all(cell_height(cell) <= SLIDE for cell in notebook.cells)


def test_a_widget_becomes_its_first_picture_and_a_note():
    """In a deck, a widget (which needs a kernel) shows the picture it first drew, if any, and says so."""
    from gpucourse.course.slides import WIDGET_NOTE, WIDGET_VIEW, drop_widgets
    from gpucourse.figures import index_explorer

    data = index_explorer()._repr_mimebundle_()
    bare = {WIDGET_VIEW: data[WIDGET_VIEW], "text/plain": "Button()"}
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("index_explorer()"),
                                               nbformat.v4.new_code_cell("a button")])
    notebook.cells[0].outputs = [nbformat.v4.new_output("display_data", data=data)]
    notebook.cells[1].outputs = [nbformat.v4.new_output("display_data", data=bare)]
    notebook.metadata["widgets"] = {"state": {}}
    drop_widgets(notebook)
    assert [o.data for o in notebook.cells[0].outputs] == [{"image/png": data["image/png"]}, {"text/plain": WIDGET_NOTE}]
    assert [o.data for o in notebook.cells[1].outputs] == [{"text/plain": WIDGET_NOTE}]
    assert "widgets" not in notebook.metadata


def test_a_widget_of_text_becomes_the_text_it_first_showed():
    """Lecture 6's format widget (a text box and a table) was only the note in its deck."""
    from gpucourse.course.slides import WIDGET_NOTE, drop_widgets
    from gpucourse.figures.precision import format_widget

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("format_widget(0.1)")])
    notebook.cells[0].outputs = [nbformat.v4.new_output("display_data", data=format_widget(0.1)._repr_mimebundle_())]
    drop_widgets(notebook)
    table, note = (o.data for o in notebook.cells[0].outputs)
    assert "value 0.1" in table["text/html"] and note == {"text/plain": WIDGET_NOTE}


def test_an_output_taller_than_its_box_is_cut_between_its_lines_up_to_five_boxes():
    """A shown source (markdown, one fenced block) or printed text a little taller than its box used to scroll in
    it, its end hidden on a projected slide (lecture 7's `timing.measure`, review of 2026-11-30); a much taller
    one (a data dump) still scrolls."""
    source = "\n".join(["def f():", *(f"    x{i} = {i}  # a comment" for i in range(40))])
    shown = nbformat.v4.new_output("display_data", data={"text/markdown": f"```python\n{source}\n```",
                                                         "text/plain": "<Markdown>"})
    printed = nbformat.v4.new_output("stream", name="stdout", text="".join(f"line {i}\n" for i in range(30)))
    dump = nbformat.v4.new_output("stream", name="stdout", text="line\n" * 200)
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("show(f)", outputs=[shown, printed, dump])])
    fit(notebook)
    outputs = [output for cell in notebook.cells for output in cell.get("outputs", [])]
    fences = [o.data["text/markdown"] for o in outputs if "text/markdown" in o.get("data", {})]
    assert len(fences) == 2 and all(f.startswith("```python\n") and f.endswith("\n```") for f in fences)
    assert [line for f in fences for line in f.splitlines()[1:-1]] == source.splitlines()
    texts = [o.text for o in outputs if o.get("output_type") == "stream"]
    assert len(texts) == 3 and "".join(texts[:2]) == printed.text and texts[2] == dump.text
    assert all(CODE_LINE * (len(f.splitlines()) - 2) + 20 <= CODE_BOX for f in fences)  # each fits the code's box
    assert all(TEXT_LINE * len(t.splitlines()) + 12 <= TEXT_BOX for t in texts[:2])
    assert len({cell.id for cell in notebook.cells}) == len(notebook.cells)
    assert all(cell_height(cell) <= SLIDE for cell in notebook.cells[:-1])


def test_printed_text_one_line_past_its_box_is_cut_in_halves_not_a_full_box_and_one_line():
    """Three of 618 slides held a box of printed text followed by a sub-slide with its last line alone."""
    fits = (TEXT_BOX - 12) // TEXT_LINE
    printed = nbformat.v4.new_output("stream", name="stdout", text="".join(f"line {i}\n" for i in range(fits + 1)))
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(table)", outputs=[printed])])
    fit(notebook)
    runs = [len(o.text.splitlines()) for cell in notebook.cells for o in cell.get("outputs", [])]
    assert sum(runs) == fits + 1 and len(runs) == 2 and max(runs) - min(runs) <= 1


def test_a_shown_source_is_cut_before_a_statement_as_shallow_as_fits_never_after_a_colon():
    """Lecture 3's shown `matmul_register_tiled` was cut after `for k in range(BK):`, its body on the next slide."""
    body = [*(f"    a{i} = {i}" for i in range(12)), "    for k in range(BK):",
            *(f"        b{i} = k * {i}" for i in range(6)), "        for j in range(TN):",
            *(f"            c{i} = j + {i}" for i in range(8)), *(f"    d{i} = {i}" for i in range(6))]
    lines = ["def kernel():", *body]
    runs = _cut_code(lines)
    assert [line for run in runs for line in run] == lines and len(runs) == 2
    assert all(CODE_LINE * len(run) + 20 <= CODE_BOX for run in runs)
    assert not runs[0][-1].endswith(":") and runs[1][0].startswith("    ") and not runs[1][0].startswith("     ")


def test_a_source_taller_than_its_box_is_cut_between_top_level_statements():
    first = "\n".join(["def first(x):", *(f"    x = x + {i}" for i in range(16))])
    second = "\n".join(["def second(x):", *(f"    x = x * {i}" for i in range(16))])
    source = f"{first}\n\n\n{second}\n\n\nprint(first(1), second(1))"
    one_function = "\n".join(["def long(x):", *(f"    x = x + {i}" for i in range(40))])
    cells = [nbformat.v4.new_code_cell(source, outputs=[nbformat.v4.new_output("stream", name="stdout", text="1 0\n")]),
             nbformat.v4.new_code_cell(one_function)]
    notebook = nbformat.v4.new_notebook(cells=cells)
    fit(notebook)
    sources = [cell.source for cell in notebook.cells if cell.source and not cell.metadata.get("transient")]
    assert len(sources) == 3 and sources[0] == first and sources[1].startswith("def second(x):")
    assert "\n".join(sources[:2]).split() == source.split() and sources[2] == one_function  # no cut inside a function
    assert all(CODE_LINE * len(text.splitlines()) <= CODE_BOX for text in sources[:2])
    assert [cell.outputs for cell in notebook.cells[:2]] == [[], []] and notebook.cells[2].outputs[0].text == "1 0\n"
    assert len({cell.id for cell in notebook.cells}) == len(notebook.cells)


def test_code_boxes_hold_their_padding_and_fenced_code_in_markdown_is_code_sized():
    """A code box 100% wide plus its padding ran 15 px past its cell, which cut the last letters of long lines (lectures
    2a to 7, review of 2026-11-30); a fenced block in a markdown cell was reveal's 0.55em, 11 px on the slide."""
    from gpucourse.course.slide_layout import CSS

    assert re.search(r"\.reveal \.jp-Cell pre \{[^}]*box-sizing: border-box", CSS)
    assert re.search(r"\.reveal \.jp-MarkdownCell pre \{[^}]*font-size: var\(--jp-code-font-size\)", CSS)


def test_a_title_is_never_alone_above_a_table_that_does_not_fit_with_it():
    """The cheat sheet's "Indices and launches" was a slide of its title alone, its table on the next sub-slide."""
    rows = "\n".join(f"| row {i} | `some_code(i) * {i}` and a few words about it, enough for one line |" for i in range(14))
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"## Title\n\n| what | formula |\n"
                                                                             f"| --- | --- |\n{rows}")])
    notebook.cells[0].metadata["slideshow"] = {"slide_type": "slide"}
    fit(notebook)
    first = notebook.cells[0].source
    assert first.startswith("## Title\n\n| what | formula |\n| --- | --- |\n| row 0 |"), first
    assert all(cell_height(cell) <= SLIDE for cell in notebook.cells)
    assert [line for cell in notebook.cells for line in cell.source.splitlines() if line.startswith("| row")] == \
        rows.splitlines()
    announced = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(
        "## Title\n\n" + "A line of text that fills the slide's width. " * 12 + "\n\nIt names them:\n\n"
        f"| what | formula |\n| --- | --- |\n{rows}")])
    fit(announced)  # lecture 4's cuDNN algorithms: the sentence ending in a colon keeps the table's first rows
    assert "It names them:\n\n| what | formula |\n| --- | --- |\n| row 0 |" in announced.cells[0].source


def test_a_table_of_short_cells_is_estimated_a_line_per_row():
    """Lecture 3's occupancy table (7 short columns) was estimated at 860 px, 525 px in the browser: its output sat
    alone on a sub-slide, and the one line printed after it on another."""
    from gpucourse.course.slide_layout import TABLE_ROW, table_height

    header = "| kernel | GPU | registers | shared bytes | blocks/SM | occupancy | limited by |"
    rows = [f"| `matmul_register_tiled` | H100 | {i} | 8192 | 2 | 25% | registers |" for i in range(10)]
    assert table_height([header, "|---|---|---|---|---|---|---|", *rows]) <= TABLE_ROW * 2 * 11
    long_row = "| a | " + "words that wrap " * 30 + "|"
    assert table_height(["| x | y |", "| - | - |", long_row]) > 3 * TABLE_ROW  # a long cell still takes lines


def test_the_sentence_announcing_a_cell_moves_to_the_sub_slide_of_that_cell():
    """60 slides ended with a sentence ending in a colon ("... on a 16 x 16 array:") whose code or figure was on the
    next sub-slide."""
    paragraph = "A sentence that fills some of a line on the slide. " * 8
    def code(lines=16):
        return nbformat.v4.new_code_cell("\n".join(f"x{i} = {i}" for i in range(lines)))

    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell(f"## Title\n\n{paragraph}\n\n{paragraph}"),
        nbformat.v4.new_markdown_cell("Two kernels that differ in one literal:"), code(),
        nbformat.v4.new_markdown_cell(f"## Next\n\n{paragraph}\n\n{paragraph}\n\nThe same, on a 16 x 16 array:"),
        code()])
    notebook.cells[0].metadata["slideshow"] = notebook.cells[3].metadata["slideshow"] = {"slide_type": "slide"}
    fit(notebook)
    kinds = slide_types(notebook)
    sources = [cell.source for cell in notebook.cells]
    assert kinds == ["slide", "subslide", "-", "slide", "subslide", "-"], kinds
    assert sources[1] == "Two kernels that differ in one literal:"
    assert sources[3].rstrip().endswith(paragraph.strip()) and sources[4] == "The same, on a 16 x 16 array:"
    assert len({cell.id for cell in notebook.cells}) == len(notebook.cells)
    used = 0.0
    for cell, kind in zip(notebook.cells, kinds):
        used = cell_height(cell) if kind in ("slide", "subslide") else used + cell_height(cell)
        assert used <= SLIDE, kinds
    title_alone = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("## Title\n\nThe code:"),
                                                  code(24)])
    fit(title_alone)
    assert [cell.source[:8] for cell in title_alone.cells] == ["## Title", "x0 = 0\nx"]  # never a title alone
    just_fits = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"## Title\n\n{paragraph}\n\nThe code:"),
                                                code(22)])
    fit(just_fits)  # lecture 4's gradients: 621 px with the code, the cell's padding counted once
    assert [cell.source for cell in just_fits.cells][1:] == ["The code:", just_fits.cells[2].source]
    mid_sentence = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(
        f"## Title\n\n{paragraph} It does it in one call:\n\n```python\ni = cuda.grid(1)\n```\n\nand the rest, once:"),
        code(20)])
    fit(mid_sentence)  # lecture 1: a sentence running on after a fenced line is not cut from its start
    assert mid_sentence.cells[0].source.endswith("and the rest, once:")


def test_code_in_a_table_cell_breaks_only_after_its_underscores_and_dots():
    """`overflow-wrap: anywhere` on table code cut names mid-word (`conv_implicit_gemm_warp_tile` / `d`, `OutOfBou` /
    `nds`: 30 words in 11 tables of the lectures): a `<wbr>` now marks where a name in a table may break, nothing
    lets it break elsewhere, and the table's height estimate breaks it at the same places."""
    from gpucourse.course.slide_layout import CSS, _cell_width, breakable_code, code_pieces

    rules = re.sub(r"/\*.*?\*/", "", CSS, flags=re.S)  # its comments left out
    assert "anywhere" not in rules and "break-all" not in rules
    html = ('<p><code>out_of_table</code></p><table><tr><td><code class="x">l1tex__t_sectors.sum</code> a_b '
            '<code>kernel_resources(...).registers</code> <code>OutOfBounds</code> <code>t.f(&quot;a_b&quot;)</code>'
            '</td></tr></table>')
    assert breakable_code(html) == (
        '<p><code>out_of_table</code></p><table><tr><td><code class="x">l1tex__<wbr>t_<wbr>sectors.<wbr>sum</code> a_b '
        '<code>kernel_<wbr>resources(...).<wbr>registers</code> <code>OutOfBounds</code> '
        '<code>t.<wbr>f(&quot;a_<wbr>b&quot;)</code></td></tr></table>')
    assert code_pieces("conv_implicit_gemm_warp_tiled") == ["conv_", "implicit_", "gemm_", "warp_", "tiled"]
    assert code_pieces("_private__") == ["_private__"]  # no break before a name's first letter or after its last
    text, longest = _cell_width("`conv_implicit_gemm_warp_tiled` and `OutOfBounds`")
    assert longest == 1.1 * len("OutOfBounds")  # the longest piece the browser cannot break
