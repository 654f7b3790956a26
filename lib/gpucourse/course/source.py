"""Show a kernel's source in a notebook, so lectures read the library's code instead of copying it."""

from __future__ import annotations

import inspect
import textwrap


def source_of(obj) -> str:
    """The source of a function, a numba kernel or device function, or a module."""
    target = getattr(obj, "py_func", obj)
    return textwrap.dedent(inspect.getsource(target)).strip()


def show_source(*objects):
    """Display the sources as one highlighted Python block (plain text outside a notebook)."""
    text = "\n\n\n".join(source_of(o) for o in objects)
    try:
        from IPython.display import Markdown
    except ImportError:  # pragma: no cover - IPython is a dependency of the course extra only
        print(text)
        return None
    return Markdown(f"```python\n{text}\n```")
