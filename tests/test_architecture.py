"""The shape of gpucourse: wings with one job each, imports that run downward only, no circles.

The import graph is read from the source (``ast``), function-level imports included, so a
lazy import cannot hide a circle.
"""

import ast
import json
from pathlib import Path

import pytest

from conftest import ROOT

PACKAGE = ROOT / "lib" / "gpucourse"
WINGS = ("run", "simulator", "kernels", "grading", "figures", "course", "classroom")
# What each wing may import besides itself (the README's maintainer path shows the same table).
MAY_IMPORT = {
    "simulator": set(),
    "kernels": set(),
    "course": set(),
    "classroom": set(),
    "run": {"simulator"},
    "figures": {"kernels", "simulator"},
    "grading": {"run", "simulator", "kernels"},
}


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module of the package under ``root``: dotted name -> file."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports anywhere in its source."""
    modules = module_names(root, package)

    def target(base: str, name: str | None) -> str | None:
        if name and f"{base}.{name}" in modules:
            return f"{base}.{name}"
        return base if base in modules else None

    graph = {}
    for name, path in modules.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                edges |= {target(alias.name, None) for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = ".".join(here.split(".")[: len(here.split(".")) - node.level + 1])
                    base = f"{base}.{node.module}" if node.module else base
                else:
                    base = node.module or ""
                edges |= {target(base, alias.name) for alias in node.names}
        graph[name] = {e for e in edges if e and e != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as a list of modules (first == last), or None."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def wing(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in WINGS else None


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Imports from one wing into another that `MAY_IMPORT` does not allow."""
    wrong = []
    for module, targets in graph.items():
        source = wing(module)
        if source is None:
            continue  # the top level may import every wing
        for t in sorted(targets):
            if wing(t) != source and wing(t) not in MAY_IMPORT[source]:
                wrong.append(f"{module} imports {t}")
    return wrong


def test_the_package_has_no_import_circle():
    cycle = find_cycle(import_graph(PACKAGE, "gpucourse"))
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_wings_import_only_downward_and_the_simulator_nothing_outside_itself():
    assert upward_imports(import_graph(PACKAGE, "gpucourse")) == []


def plant(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, source in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(source)
    return root


def test_a_planted_circle_is_found_even_through_a_lazy_import(tmp_path):
    root = plant(tmp_path, {
        "__init__.py": "",
        "simulator/__init__.py": "from .trace import recording\n",
        "simulator/trace.py": "def recording():\n    from ..grading import core\n",
        "grading/__init__.py": "",
        "grading/core.py": "from ..simulator import recording\n",
    })
    graph = import_graph(root, "pkg")
    assert find_cycle(graph) == ["pkg.grading.core", "pkg.simulator", "pkg.simulator.trace", "pkg.grading.core"]
    assert upward_imports(graph) == ["pkg.simulator.trace imports pkg.grading.core"]
    (root / "simulator" / "trace.py").write_text("def recording():\n    pass\n")
    assert find_cycle(import_graph(root, "pkg")) is None


def test_at_most_four_modules_at_the_top_and_every_wing_says_what_it_holds_and_may_import():
    top = sorted(p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert len(top) <= 4, top
    assert sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()) == sorted(WINGS)
    for name in WINGS:
        doc = ast.get_docstring(ast.parse((PACKAGE / name / "__init__.py").read_text())) or ""
        assert "Holds:" in doc and "May import:" in doc, f"gpucourse.{name}'s docstring"


def exported(module: str) -> set[str]:
    """The names ``gpucourse`` or one of its wings exports (its ``__all__``, read from the source)."""
    path = PACKAGE.joinpath(*module.split(".")[1:], "__init__.py")
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return set()


def code_of(path: Path) -> str:
    if path.suffix != ".ipynb":
        return path.read_text()
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    lines = [line for c in cells for line in "".join(c["source"]).splitlines()]
    return "\n".join(line for line in lines if not line.lstrip().startswith(("%", "!")))


def private_imports(source: str) -> list[str]:
    """Imports of gpucourse names that neither the package nor a wing exports."""
    wrong = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "gpucourse":
            public = exported(node.module) if node.module == "gpucourse" or node.module.count(".") == 1 and \
                wing(node.module) else set()
            wrong += [f"from {node.module} import {a.name}" for a in node.names if a.name not in public]
        elif isinstance(node, ast.Import):
            wrong += [f"import {a.name}" for a in node.names
                      if a.name.startswith("gpucourse.") and (a.name.count(".") > 1 or not wing(a.name))]
    return wrong


USERS = sorted([*ROOT.glob("lectures/*.ipynb"), *ROOT.glob("solutions/*/*.ipynb"),
                *ROOT.glob("assignments/*/*.ipynb"), *ROOT.glob("benchmarks/*.py")])


@pytest.mark.parametrize("path", USERS, ids=lambda p: str(p.relative_to(ROOT)))
def test_notebooks_and_benchmarks_import_only_public_names(path):
    assert private_imports(code_of(path)) == []


def test_a_private_import_is_caught():
    assert private_imports("from gpucourse.grading.core import poison\nimport gpucourse.run.ptx\n"
                           "from gpucourse.grading import check_kernel, explain_failure\n") == [
        "from gpucourse.grading.core import poison", "import gpucourse.run.ptx",
        "from gpucourse.grading import explain_failure"]
