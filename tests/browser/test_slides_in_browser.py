"""Every lecture deck in a real browser, offline: each slide fits the 1280 x 720 canvas or scrolls."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LECTURES = sorted(path.stem for path in (ROOT / "lectures").glob("*.ipynb"))

# For every slide: its indices, its title, its size, and whether it scrolls once at its bottom.
MEASURE_SLIDES = """() => Reveal.getSlides().map((slide) => {
    const {h, v} = Reveal.getIndices(slide);
    Reveal.slide(h, v, Infinity);  // every fragment shown: the slide at its tallest
    slide.scrollTop = slide.scrollHeight;
    const heading = slide.querySelector("h1, h2, h3");
    return {
        where: `${h}/${v} ${heading ? heading.textContent.replace("¶", "") : ""}`,
        height: slide.clientHeight,
        contentHeight: slide.scrollHeight,
        overflowY: getComputedStyle(slide).overflowY,
        scrolledToBottom: slide.scrollHeight - slide.scrollTop - slide.clientHeight < 2,
    };
})"""


def open_deck(page, deck: Path):
    """Open ``deck`` from disk with the network cut; return the URLs it requested."""
    requested = []
    page.on("request", lambda request: requested.append(request.url))
    page.context.set_offline(True)
    page.goto(deck.as_uri())
    page.wait_for_function("window.Reveal && Reveal.isReady()")
    return requested


def slide_titled(page, title: str):
    page.evaluate("""(title) => {
        const slide = Reveal.getSlides().find((s) => (s.querySelector("h3") || {}).textContent?.startsWith(title));
        const {h, v} = Reveal.getIndices(slide);
        Reveal.slide(h, v, Infinity);
    }""", title)
    return page.locator(".reveal .slides section.present:not(.stack)")


@pytest.mark.parametrize("lecture", LECTURES)
def test_every_slide_fits_the_canvas_or_scrolls(built_decks, page, lecture):
    open_deck(page, built_decks / f"{lecture}.slides.html")
    assert page.evaluate("[Reveal.getConfig().width, Reveal.getConfig().height]") == [1280, 720]
    for slide in page.evaluate(MEASURE_SLIDES):
        assert slide["height"] <= 720, slide
        if slide["contentHeight"] > slide["height"]:
            assert slide["overflowY"] in ("auto", "scroll"), f"clipped: {slide}"
            assert slide["scrolledToBottom"], f"cannot scroll to its bottom: {slide}"


@pytest.mark.parametrize("title", ["A missing barrier before", "A missing barrier after"])
def test_missing_barrier_message_can_be_scrolled_into_view(built_decks, page, title):
    """The fault message's last line, which says where the barrier goes, is reachable with the mouse wheel."""
    open_deck(page, built_decks / "01b_debugging_on_the_cpu.slides.html")
    slide = slide_titled(page, title)
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
