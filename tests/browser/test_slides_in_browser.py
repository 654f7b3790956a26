"""Every lecture deck in a real browser, offline: slides fit the 1280 x 720 canvas, and what does not scrolls down."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LECTURES = sorted(path.stem for path in (ROOT / "lectures").glob("*.ipynb"))
SCREEN = 720
MOST_TALLER = 0.05  # at most this share of all slides may be taller than a screen ...
TALLEST = 1.5 * SCREEN  # ... and none taller than this

# For every slide: its indices, its title (a continuation's is its stack's), its size, and whether it scrolls
# once at its bottom.
MEASURE_SLIDES = """() => Reveal.getSlides().map((slide) => {
    const {h, v} = Reveal.getIndices(slide);
    Reveal.slide(h, v, Infinity);  // every fragment shown: the slide at its tallest
    slide.scrollTop = slide.scrollHeight;
    const heading = slide.querySelector("h1, h2, h3") || slide.parentElement.querySelector("h1, h2, h3");
    return {
        where: `${h}/${v} ${heading ? heading.textContent.replace("¶", "") : ""}`,
        height: slide.clientHeight,
        contentHeight: slide.scrollHeight,
        overflowY: getComputedStyle(slide).overflowY,
        scrolledToBottom: slide.scrollHeight - slide.scrollTop - slide.clientHeight < 2,
        pastRightEdge: Math.max(0, ...Array.from(slide.querySelectorAll("table, img, .jp-OutputArea-output"),
            (element) => element.getBoundingClientRect().right - slide.getBoundingClientRect().right)),
    };
})"""


# For every table of every slide: where a line of a cell breaks between two letters or digits (inside a word, as
# `conv_implicit_gemm_warp_tile` / `d`; a break after an underscore or a dot is where a name may break), and how far it
# runs past the slide's right edge. Only the slides with a table are shown (showing one takes most of the time).
WORDS_CUT_IN_TABLES = """() => Reveal.getSlides().filter((slide) => slide.querySelector("table")).flatMap((slide) => {
    const {h, v} = Reveal.getIndices(slide);
    Reveal.slide(h, v, Infinity);
    return Array.from(slide.querySelectorAll("table"), (table) => {
        const cut = [], walker = document.createTreeWalker(table, NodeFilter.SHOW_TEXT);
        let before = null, node;
        while ((node = walker.nextNode())) {
            const cell = node.parentElement.closest("td, th");
            for (let i = 0; i < node.length; i++) {
                const range = document.createRange();
                range.setStart(node, i);
                range.setEnd(node, i + 1);
                const box = range.getClientRects()[0];
                if (!box) continue;
                const letter = node.data[i];
                if (before && before.cell === cell && box.top > before.top + 3 && /[^\\W_]/.test(before.letter)
                        && /[^\\W_]/.test(letter)) {
                    cut.push(`${cell.textContent.trim().slice(0, 60)}: ${before.letter} / ${letter}`);
                }
                before = {cell, letter, top: box.top};
            }
        }
        const right = table.getBoundingClientRect().right - slide.getBoundingClientRect().right;
        return {where: `${h}/${v}`, cut, pastRightEdge: right};
    });
})"""


def open_deck(page, deck: Path):
    """Open ``deck`` from disk with the network cut; return the URLs it requested."""
    requested = []
    page.on("request", lambda request: requested.append(request.url))
    page.context.set_offline(True)
    page.goto(deck.as_uri())
    page.wait_for_function("window.Reveal && Reveal.isReady()")
    return requested


def slide_showing(page, title: str, text: str):
    """Show the first slide from the one titled ``title`` on that contains ``text``."""
    page.evaluate("""([title, text]) => {
        const slides = Reveal.getSlides();
        const first = slides.findIndex((s) => (s.querySelector("h3") || {}).textContent?.startsWith(title));
        const slide = slides.slice(first).find((s) => s.textContent.includes(text));
        const {h, v} = Reveal.getIndices(slide);
        Reveal.slide(h, v, Infinity);
    }""", [title, text])
    return page.locator(".reveal .slides section.present:not(.stack)")


def test_slides_fit_the_canvas(built_decks, page):
    """Few slides taller than a screen, none taller than one and a half; each fills the canvas or scrolls; nothing
    runs past its right edge."""
    slides = []
    for lecture in LECTURES:
        open_deck(page, built_decks / f"{lecture}.slides.html")
        assert page.evaluate("[Reveal.getConfig().width, Reveal.getConfig().height]") == [1280, SCREEN]
        for slide in page.evaluate(MEASURE_SLIDES):
            assert slide["height"] <= SCREEN, (lecture, slide)
            assert slide["pastRightEdge"] <= 2, f"cut at the slide's right edge (slides do not scroll sideways): {lecture} {slide}"
            if slide["contentHeight"] > slide["height"]:
                assert slide["overflowY"] in ("auto", "scroll"), f"clipped: {lecture} {slide}"
                assert slide["scrolledToBottom"], f"cannot scroll to its bottom: {lecture} {slide}"
            slides.append((slide["contentHeight"], lecture, slide["where"]))
    taller = sorted((slide for slide in slides if slide[0] > SCREEN), reverse=True)
    worst = "\n".join(f"  {height} px: {lecture}, slide {where}" for height, lecture, where in taller[:10])
    assert len(taller) <= MOST_TALLER * len(slides), (
        f"{len(taller)} of {len(slides)} slides are taller than {SCREEN} px; the tallest:\n{worst}")
    assert not taller or taller[0][0] <= TALLEST, f"slides taller than {TALLEST:.0f} px:\n{worst}"


@pytest.mark.parametrize("title", ["A missing barrier before", "A missing barrier after"])
def test_missing_barrier_message_can_be_scrolled_into_view(built_decks, page, title):
    """The fault message's last line, which says where the barrier goes, is reachable with the mouse wheel."""
    open_deck(page, built_decks / "01b_debugging_on_the_cpu.slides.html")
    slide = slide_showing(page, title, "put cuda.syncthreads()")
    advice = slide.locator(".jp-OutputArea-output pre", has_text="put cuda.syncthreads()").first
    page.mouse.move(640, 360)
    for _ in range(20):  # a wheel step at a time, until the line's bottom is on the screen
        box = advice.bounding_box()
        if box["y"] + box["height"] <= page.viewport_size["height"]:
            break
        page.mouse.wheel(0, 200)
        page.wait_for_timeout(50)
    box, canvas = advice.bounding_box(), page.locator(".reveal .slides").bounding_box()
    assert canvas["y"] <= box["y"] and box["y"] + box["height"] <= canvas["y"] + canvas["height"], (box, canvas)


def test_deck_steps_through_offline(built_decks, page):
    """Space goes through every slide and fragment of a deck, and nothing is fetched from the network."""
    requested = open_deck(page, built_decks / "01_threads_blocks_grids.slides.html")
    slides = page.evaluate("Reveal.getTotalSlides()")
    visited = {page.evaluate("Reveal.getSlidePastCount()")}
    for _ in range(200):
        if page.evaluate("Reveal.isLastSlide() && !Reveal.availableFragments().next"):
            break
        page.keyboard.press("Space")
        visited.add(page.evaluate("Reveal.getSlidePastCount()"))
    assert visited == set(range(slides)), f"visited {sorted(visited)} of {slides} slides"
    remote = [url for url in requested if not url.startswith(("file:", "data:", "about:"))]
    assert not remote, f"the deck fetched from the network: {remote}"


def test_a_long_name_in_a_table_breaks_after_an_underscore_or_a_dot_never_inside_a_word(page, tmp_path):
    """A narrow column of long code names: each wraps after an underscore or a dot (`overflow-wrap: anywhere` cut
    them anywhere), and the table stays within the slide."""
    import nbformat

    from gpucourse.course.slides import copy_assets, write_deck

    names = ["conv_implicit_gemm_warp_tiled", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
             "kernel_resources(...).registers", "UninitializedRead"]
    rows = "\n".join(f"| `{name}` | {'words that fill the wide column of this table, ' * 3} |" for name in names)
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"## Names\n\n| name | what |\n| --- | --- |\n{rows}")])
    copy_assets(tmp_path)
    open_deck(page, write_deck(notebook, "names", tmp_path))
    tables = page.evaluate(WORDS_CUT_IN_TABLES)
    assert [table["cut"] for table in tables] == [[]], tables
    assert tables[0]["pastRightEdge"] <= 2, tables
    column = page.locator("td code").first.bounding_box()
    assert column["width"] < 0.5 * 1280  # it did wrap (the test tests something)
    page.add_style_tag(content="td, td code { overflow-wrap: anywhere; word-break: break-all; }")  # as it was
    assert page.evaluate(WORDS_CUT_IN_TABLES)[0]["cut"]  # words cut inside: the check sees them


def test_no_name_in_a_table_of_any_lecture_is_cut_inside_a_word(built_decks, page):
    """Every table of every deck (30 words in 11 tables were cut: `OutOfBou` / `nds`, `ld.s` / `um`), and none runs
    past the slide's right edge."""
    cut, wide = [], []
    for lecture in LECTURES:
        open_deck(page, built_decks / f"{lecture}.slides.html")
        for table in page.evaluate(WORDS_CUT_IN_TABLES):
            cut += [(lecture, table["where"], word) for word in table["cut"]]
            if table["pastRightEdge"] > 2:
                wide.append((lecture, table))
    assert not cut, "\n".join(map(str, cut))
    assert not wide, wide
