"""A figure's text as a slide shows it: the figure, drawn as a notebook shows it (``bbox_inches="tight"``), scaled
to fit the slides' figure box (`gpucourse.course.slide_layout`)."""

import matplotlib
from matplotlib.text import Text

from gpucourse.course.slide_layout import FIGURE_BOX, FIGURE_WIDTH

SMALLEST_TEXT = 13  # px: the least a text may be on a slide


def slide_scale(fig) -> float:
    """How much a slide shrinks ``fig``'s picture: its tight box and the padding ``savefig`` puts around it."""
    box = fig.get_tightbbox(fig.canvas.get_renderer()).padded(matplotlib.rcParams["savefig.pad_inches"])  # inches
    return min(1, FIGURE_WIDTH / (box.width * fig.dpi), FIGURE_BOX / (box.height * fig.dpi))


def smallest_text(fig, texts=None) -> tuple[float, str]:
    """(height in px on a slide, text) of the smallest of ``texts``, every visible text of ``fig`` by default."""
    fig.canvas.draw()  # tick labels and layouts are made at drawing
    if texts is None:
        texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    scale = slide_scale(fig)
    return min((t.get_fontsize() * fig.dpi / 72 * scale, t.get_text()) for t in texts)
