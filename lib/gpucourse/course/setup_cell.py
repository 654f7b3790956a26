"""The first cells of every notebook, rendered from one configured source.

pyproject.toml's ``[tool.gpucourse]`` says where Colab installs the course
package from. ``python -m gpucourse.course.setup_cell lectures solutions
assignments``, run in the repository root, makes every notebook below those
folders start with the setup cell (its first code cell), after an "Open in
Colab" badge (a markdown cell) when ``install-source`` names a repository,
and says in one line how many it rewrote; a test checks they all match, and
`out_of_date` lists those that do not (the student edition refuses them).

The setup cell installs the course package when it is missing: from
``install-source`` when one is set, else from the wheel that the student
edition carries (``gpucourse-*.whl``), found beside the notebook (or up to two
folders up: the edition's root), uploaded to Colab's ``/content``, or in Google
Drive (``MyDrive`` or a folder in it, once Drive is mounted). It cannot use
gpucourse to install gpucourse, so it carries its own logic: install with pip,
say in one message what failed, and restart the runtime after an install,
because numba-cuda redirects ``numba.cuda`` through a ``.pth`` file that
Python reads only when it starts.
"""

from __future__ import annotations

import re
import string
import sys
import tomllib
from pathlib import Path, PurePosixPath

import nbformat

MARKER = "# Setup: picks the GPU or the CPU simulator"
BADGE_MARKER = "[![Open In Colab]"
PLACEHOLDER = "git+https://github.com/gpu-kernels-course/gpu-kernels-course"  # no course is hosted there
WHEEL_PLACES = (".", "..", "../..", "/content", "/content/drive/MyDrive", "/content/drive/MyDrive/*")

FROM_SOURCE = string.Template('''    course = "$requirement"
    where = "$source"''')

FROM_WHEEL = string.Template('''    wheels = [sorted(glob.glob(os.path.join(place, "gpucourse-*.whl")), key=os.path.getmtime)
              for place in $places]
    wheels = [found[-1] for found in wheels if found]  # the newest in the first place that has one
    if not wheels:
        drive = "" if os.path.isdir("/content/drive/MyDrive") else (
            " To use Drive, mount it first (Files panel > Mount Drive).")
        raise SetupStopped("The course package was not found: no gpucourse-*.whl beside this notebook, in "
                           "/content or in Google Drive (MyDrive or a folder in it).\\n"
                           "Upload the gpucourse-*.whl file of your course's student edition (Files panel > "
                           f"Upload), or put it in your Google Drive, and run this cell again.{drive}")
    where = os.path.abspath(wheels[0])
    course = f"gpucourse[$extra] @ file://{where}"''')

TEMPLATE = string.Template(f'''{MARKER} (on Colab, installs the course first).
try:
    import gpucourse
except ModuleNotFoundError:
    import glob, os, re, subprocess, sys
    from IPython import get_ipython

    class SetupStopped(Exception):
        def _render_traceback_(self):  # IPython shows the message alone, no traceback
            return str(self).splitlines()

$locate
    print(f"Installing the course package from {{where}} (about a minute)...")
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-color", course],
                         capture_output=True, text=True, env={{**os.environ, "GIT_TERMINAL_PROMPT": "0"}})
    if pip.returncode:
        error = (re.findall(r"(?m)^\\s*(?:ERROR|fatal):.*", pip.stderr) or pip.stderr.splitlines() or ["?"])[-1]
        raise SetupStopped(f"Could not install the course package from {{where}}: {{error.strip()}}\\n"
                           "Check that the runtime is online and run this cell again; "
                           f"`%pip install '{{course}}'` shows all of pip's output.")
    get_ipython().kernel.do_shutdown(True)  # numba-cuda takes effect only in a fresh interpreter
    raise SetupStopped("Installed the course package; restarting the runtime. Run this cell again.")
gpucourse.show_device()''')

BADGE = "[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({url})"
GITHUB_SOURCE = re.compile(r"git\+https://github\.com/(?P<repo>[^/@]+/[^/@]+?)(?:\.git)?(?:@(?P<ref>[^#]+))?")


def configuration(pyproject: Path) -> dict:
    """pyproject.toml's ``[tool.gpucourse]`` table."""
    return tomllib.loads(pyproject.read_text())["tool"]["gpucourse"]


def render_cell(source: str, extra: str) -> str:
    """The setup cell that installs ``gpucourse[extra]`` from ``source``, or from a wheel when it is empty."""
    if source:
        locate = FROM_SOURCE.substitute(requirement=f"gpucourse[{extra}] @ {source}", source=source)
    else:
        locate = FROM_WHEEL.substitute(places=repr(WHEEL_PLACES), extra=extra)
    return TEMPLATE.substitute(locate=locate)


def install_source(config: dict) -> str:
    """``install-source``, refused when it is the placeholder; empty when unset (the wheel route)."""
    source = config.get("install-source", "")
    if source == PLACEHOLDER:
        raise ValueError(f"install-source is {PLACEHOLDER}, a placeholder where no course is hosted: set it to "
                         "the students' repository (git+https://github.com/<owner>/<repo>) or leave it empty "
                         "(Colab then installs the wheel of the student edition)")
    return source


def render(pyproject: Path) -> str:
    """The setup cell's source for the repository whose pyproject.toml is given."""
    config = configuration(pyproject)
    return render_cell(install_source(config), config["colab-extra"])


def student_path(notebook: PurePosixPath) -> PurePosixPath:
    """Where students find a notebook: a solution's release is under assignments/."""
    if notebook.parts[0] == "solutions":
        return PurePosixPath("assignments", *notebook.parts[1:])
    return notebook


def colab_url(source: str, notebook: PurePosixPath) -> str:
    """Colab's address of ``notebook`` (relative to the repository root) in the GitHub repository ``source``."""
    match = GITHUB_SOURCE.fullmatch(source)
    if match is None:
        raise ValueError(f"install-source {source!r} is not git+https://github.com/<owner>/<repo>[@<branch>]")
    branch = match["ref"] or "main"
    return f"https://colab.research.google.com/github/{match['repo']}/blob/{branch}/{student_path(notebook)}"


def render_badge(pyproject: Path, notebook: PurePosixPath) -> str | None:
    """The "Open in Colab" badge of ``notebook`` (relative to the repository root); None without a source."""
    source = install_source(configuration(pyproject))
    return BADGE.format(url=colab_url(source, notebook)) if source else None


def first_code_cell(notebook):
    return next((c for c in notebook.cells if c.cell_type == "code"), None)


def badge_cell(notebook):
    """The notebook's badge cell: its first cell, when that is one."""
    first = notebook.cells[0] if notebook.cells else None
    if first is not None and first.cell_type == "markdown" and first.source.startswith(BADGE_MARKER):
        return first
    return None


def update(notebook, source: str, badge: str | None) -> bool:
    """Make ``notebook`` (in memory) start with the badge (none when None) and the setup cell; True when it
    changed."""
    changed = False
    cell = badge_cell(notebook)
    if badge is None:
        if cell is not None:
            notebook.cells.remove(cell)
            changed = True
    elif cell is None:
        notebook.cells.insert(0, nbformat.v4.new_markdown_cell(badge, metadata={"slideshow": {"slide_type": "skip"}}))
        changed = True
    elif cell.source != badge:
        cell.source, changed = badge, True
    cell = first_code_cell(notebook)
    if cell is not None and cell.source.startswith(MARKER):
        changed |= cell.source != source
        cell.source = source
    else:
        notebook.cells.insert(1 if badge_cell(notebook) else 0, nbformat.v4.new_code_cell(source))
        changed = True
    return changed


def rewrite(path: Path, source: str, badge: str | None) -> bool:
    """Make the notebook start with the badge (none when None) and the setup cell; True when the file changed."""
    notebook = nbformat.read(path, as_version=4)
    changed = update(notebook, source, badge)
    if changed:
        nbformat.write(notebook, path)
    return changed


def notebooks(root: Path, folders) -> list[Path]:
    """The notebooks below ``root``'s ``folders`` (checkpoints left out)."""
    return [path for folder in folders for path in sorted((root / folder).rglob("*.ipynb"))
            if ".ipynb_checkpoints" not in path.relative_to(root).parts]


def sync(root: Path, folders, write: bool = True) -> tuple[list[str], int]:
    """The notebooks below ``root``'s ``folders`` whose badge or setup cell is not what ``root``'s pyproject.toml
    gives (relative to ``root``), rewritten unless ``write`` is false, and how many notebooks there are.
    ValueError for an install-source that is the placeholder."""
    pyproject = root / "pyproject.toml"
    source = render(pyproject)
    found, stale = notebooks(root, folders), []
    for path in found:
        name = PurePosixPath(path.relative_to(root).as_posix())
        badge = render_badge(pyproject, name)
        if rewrite(path, source, badge) if write else update(nbformat.read(path, as_version=4), source, badge):
            stale.append(str(name))
    return stale, len(found)


def out_of_date(root: Path, folders) -> list[str]:
    """The notebooks below ``root``'s ``folders`` whose badge or setup cell disagrees with its pyproject.toml."""
    return sync(root, folders, write=False)[0]


def main(folders: list[str]) -> int:
    try:
        rewritten, total = sync(Path("."), folders)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if rewritten:
        print(f"setup cells: rewrote {len(rewritten)} of {total} notebooks to match pyproject.toml's install-source "
              f"({', '.join(rewritten[:3])}{', ...' if len(rewritten) > 3 else ''}): commit them")
    else:
        print(f"setup cells: {total} notebooks up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
