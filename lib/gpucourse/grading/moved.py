"""The import paths of the checks before the wings (``gpucourse.checks`` ...), kept for one release.

Assignments released before the change import from them; they keep working, and say where
the names went, except under nbgrader (any stderr would fail a test cell).
"""

from __future__ import annotations

import importlib
import os
import warnings


def forward(old: str, new: str):
    """A module ``__getattr__`` for ``old`` that hands out ``new``'s names, with a DeprecationWarning."""

    def __getattr__(name: str):
        if name.startswith("__"):  # the import system asking for __path__, __spec__ ...
            raise AttributeError(name)
        value = getattr(importlib.import_module(new), name)
        if not os.environ.get("NBGRADER_EXECUTION"):
            warnings.warn(f"{old} is now {new}: import {name} from there", DeprecationWarning, stacklevel=2)
        return value

    return __getattr__
