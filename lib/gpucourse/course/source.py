"""Show a kernel's source in a notebook, so lectures read the library's code instead of copying it."""

from __future__ import annotations

import ast
import inspect
import textwrap


def source_of(obj, docstrings: bool = True) -> str:
    """The source of a function, a numba kernel or device function, or a module; without ``docstrings``, the
    docstrings of it and of the functions and classes inside it are left out (a slide shows the code)."""
    target = getattr(obj, "py_func", obj)
    try:
        text = textwrap.dedent(inspect.getsource(target)).strip()
    except (TypeError, OSError):  # not a function, or one without a file (built in, or by exec from a string)
        raise TypeError(f"show_source shows the code of a function, kernel or module defined in a cell or a .py "
                        f"file, not {obj!r}") from None
    if docstrings:
        return text
    lines = text.splitlines()
    dropped = set()
    for node in ast.walk(ast.parse(text)):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str) and len(body) > 1):
            dropped.update(range(body[0].lineno - 1, body[0].end_lineno))
    return "\n".join(line for i, line in enumerate(lines) if i not in dropped)


def show_source(*objects, docstrings: bool = True):
    """Display the sources as one highlighted Python block (plain text outside a notebook); ``docstrings=False``
    leaves the docstrings out."""
    text = "\n\n\n".join(source_of(o, docstrings) for o in objects)
    try:
        from IPython.display import Markdown
    except ImportError:  # pragma: no cover - IPython is a dependency of the course extra only
        print(text)
        return None
    return Markdown(f"```python\n{text}\n```")
