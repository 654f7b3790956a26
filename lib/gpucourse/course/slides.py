"""Every lecture notebook as a reveal.js slide deck that works offline.

``python -m gpucourse.course.slides SRC_DIR OUT_DIR [--no-execute]`` runs each
``SRC_DIR/*.ipynb`` (in SRC_DIR, 600 s per cell) and exports it with nbconvert's
SlidesExporter to ``OUT_DIR/<name>.slides.html``. Cells are split into slides by
their ``metadata.slideshow.slide_type`` and, where a slide would be taller than the
canvas, into sub-slides by the rules of `slide_layout`.

The decks load nothing from the network. The two libraries they need are copied
beside them, from Python packages of the ``student`` extra (``course`` has it too), and referenced by
relative URLs:

* ``OUT_DIR/reveal.js/``: reveal.js 5 (``dist/``, ``plugin/notes/``) as shipped in
  the sphinx-revealjs wheel;
* ``OUT_DIR/mathjax/``: MathJax 2.7 (the ``MathJax.Hub`` API that nbconvert's
  template calls) as shipped in the jupyter-server-mathjax wheel, STIX web fonts only.

nbconvert's reveal template also loads require.js, jQuery and mermaid from a CDN;
the template below drops them and loads reveal.js with plain script tags instead.
Widget outputs become a short note: a static page has no kernel to drive them.

Every slide is a 1280 x 720 canvas, top-aligned. A slide still taller than that
scrolls inside the canvas (mouse wheel, trackpad or scroll bar) instead of being
clipped, and a code line wider than it wraps (`slide_layout.CSS`).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import jupyter_server_mathjax
import nbformat
import sphinx_revealjs
from jinja2 import DictLoader
from nbconvert import SlidesExporter

from .execution import run_notebook
from .slide_layout import CSS, breakable_code, fit

REVEAL_DIR = "reveal.js"
MATHJAX_DIR = "mathjax"
THEME = "white"  # a theme whose fonts ship with reveal.js (several others import Google Fonts)
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_NOTE = "[interactive widget: run the notebook to use it]"
WIDTH, HEIGHT = 1280, 720  # the canvas every slide must fit, or scroll in

TEMPLATE_NAME = "gpucourse_slides.html.j2"
TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_jquery -%}{%- endblock -%}
{%- block html_head_js_requirejs -%}{%- endblock -%}
{%- block html_head_js_mermaidjs -%}{%- endblock -%}
{%- block html_head_js_mathjax -%}
<script>
// This MathJax copy has only the STIX web fonts (as in Jupyter's own pages).
window.MathJax = {"HTML-CSS": {availableFonts: [], preferredFont: null, webFont: "STIX-Web", imageFont: null}};
</script>
{{ super() }}
{%- endblock html_head_js_mathjax -%}
{%- block html_head_css -%}
<style>
/* A slide (a section that is not a stack of sections) fills the canvas and scrolls when taller. */
.reveal .slides > section:not(.stack),
.reveal .slides > section.stack > section {
    height: 100%;
    box-sizing: border-box;
    overflow-y: auto;
    overflow-x: hidden;
}
.reveal .slides pre {
    overflow-x: auto;
}
""" + CSS + """</style>
{%- endblock html_head_css -%}
{% block footer_js %}
<script src="{{ resources.reveal.url_prefix }}/dist/reveal.js"></script>
<script src="{{ resources.reveal.url_prefix }}/plugin/notes/notes.js"></script>
<script>
Reveal.initialize({
    controls: true,
    progress: true,
    history: true,
    transition: "{{ resources.reveal.transition }}",
    slideNumber: "{{ resources.reveal.number }}",
    plugins: [RevealNotes],
    width: {{ resources.reveal.width }},
    height: {{ resources.reveal.height }},
    center: false,  // top-aligned: a slide taller than the canvas scrolls from its title down
});
// MathJax lays out hidden slides at zero size: typeset each slide again when it shows.
Reveal.on("slidechanged", function (event) {
    if (window.MathJax && MathJax.Hub) {
        MathJax.Hub.Queue(["Rerender", MathJax.Hub, event.currentSlide]);
    }
});
</script>
{% endblock footer_js %}
"""


def copy_assets(out_dir: Path) -> None:
    """Copy reveal.js and MathJax from their Python packages into ``out_dir``."""
    reveal = Path(sphinx_revealjs.__file__).parent / "_static" / "revealjs"
    mathjax = Path(jupyter_server_mathjax.__file__).parent / "static"
    for need in (reveal / "dist" / "reveal.js", mathjax / "MathJax.js"):
        if not need.is_file():
            raise FileNotFoundError(f"{need} is missing: install the pinned `student` extra (`make slides` does)")
    skip = shutil.ignore_patterns("*.map", "*.esm.js")
    shutil.copytree(reveal / "dist", out_dir / REVEAL_DIR / "dist", ignore=skip, dirs_exist_ok=True)
    shutil.copytree(reveal / "plugin" / "notes", out_dir / REVEAL_DIR / "plugin" / "notes",
                    ignore=skip, dirs_exist_ok=True)
    shutil.copy2(reveal / "LICENSE", out_dir / REVEAL_DIR / "LICENSE")
    shutil.copytree(mathjax, out_dir / MATHJAX_DIR, dirs_exist_ok=True)


def exporter() -> SlidesExporter:
    """nbconvert's SlidesExporter, pointed at the local copies of the assets."""
    return SlidesExporter(
        extra_loaders=[DictLoader({TEMPLATE_NAME: TEMPLATE})],
        template_file=TEMPLATE_NAME,
        reveal_url_prefix=REVEAL_DIR,
        reveal_theme=THEME,
        reveal_width=str(WIDTH),
        reveal_height=str(HEIGHT),
        mathjax_url=f"{MATHJAX_DIR}/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe",
        embed_images=True,  # markdown images too, so a deck needs no lectures/ beside it
    )


def drop_widgets(notebook) -> None:
    """Replace widget outputs (which need a kernel) by a short note, under the picture or text the widget first showed
    when it has one (`gpucourse.simulator.viewer.explorer`), and drop widget state."""
    notebook.metadata.pop("widgets", None)
    for cell in notebook.cells:
        outputs = []
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if WIDGET_VIEW in data:
                output["metadata"] = {}
                output["data"] = {"text/plain": WIDGET_NOTE}
                for kind in ("image/png", "text/html"):  # what the widget first showed, the note below it
                    if kind in data:
                        outputs.append(nbformat.v4.new_output("display_data", data={kind: data[kind]}))
            outputs.append(output)
        if "outputs" in cell:
            cell["outputs"] = outputs


def write_deck(notebook, name: str, out_dir: Path) -> Path:
    """Write ``out_dir/<name>.slides.html`` for an (executed) notebook; return its path."""
    drop_widgets(notebook)
    fit(notebook)
    html, _ = exporter().from_notebook_node(notebook, resources={"metadata": {"name": name}})
    html = breakable_code(html)  # a name in a table breaks between its words only
    target = out_dir / f"{name}.slides.html"
    target.write_text(html, encoding="utf-8")
    return target


def export(path: Path, out_dir: Path, run: bool = True) -> Path:
    """Write ``out_dir/<name>.slides.html`` for the notebook at ``path`` (run first, in its folder)."""
    notebook = nbformat.read(path, as_version=4)
    if run:
        run_notebook(notebook, path.parent)
    return write_deck(notebook, path.stem, out_dir)


def build(src: Path, out_dir: Path, run: bool = True) -> list[Path]:
    """Export every ``src/*.ipynb`` (or the one notebook ``src``) into ``out_dir``, assets included; return the
    decks."""
    src = Path(src)
    notebooks = [src] if src.suffix == ".ipynb" and src.is_file() else sorted(src.glob("*.ipynb"))
    if not notebooks:
        raise FileNotFoundError(f"no notebooks in {src}" if src.is_dir() else f"no notebook {src}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    copy_assets(out_dir)
    decks = []
    for path in notebooks:
        decks.append(export(path, out_dir, run))
        print(f"wrote {decks[-1]}")
    return decks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpucourse.course.slides", description=__doc__.split("\n")[0])
    parser.add_argument("src_dir", type=Path, help="folder of the lecture notebooks, or one notebook")
    parser.add_argument("out_dir", type=Path, help="folder for the decks and their assets")
    parser.add_argument("--no-execute", action="store_true",
                        help="export the notebooks as they are, without running them")
    args = parser.parse_args(argv)
    try:
        build(args.src_dir, args.out_dir, run=not args.no_execute)
    except FileNotFoundError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
