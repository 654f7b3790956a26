"""Inline figures drawn twice at the end of a cell instead of three times.

At the end of every cell, IPython runs pyplot's redraw of the open figures (meant for windows that show them
live) and then the inline backend's display of the same figures as PNG, which draws each again (twice, for
its tight bounding box). An inline figure gains nothing from the first draw. `install` adds a hook that runs
the inline display before the redraw: it shows and closes the figures, so the redraw finds none left, and the
display that follows finds nothing new. Any other backend (a window, ``%matplotlib widget``) has no inline
display, and its redraw runs as before.
"""

from __future__ import annotations

import sys


def install() -> bool:
    """Add the hook to the running IPython shell (before pyplot adds its own, at the first figure); False outside
    IPython."""
    ipython = sys.modules.get("IPython")  # wherever a shell runs, IPython is imported already
    shell = ipython.get_ipython() if ipython else None
    if shell is None:
        return False
    if _show_inline_figures not in shell.events.callbacks["post_execute"]:
        shell.events.register("post_execute", _show_inline_figures)
    return True


def _show_inline_figures() -> None:
    """The inline backend's end-of-cell display, now, where that backend is the one in use."""
    inline = sys.modules.get("matplotlib_inline.backend_inline")
    if inline is None:
        return
    from IPython import get_ipython

    if inline.flush_figures in get_ipython().events.callbacks["post_execute"]:
        inline.flush_figures()
