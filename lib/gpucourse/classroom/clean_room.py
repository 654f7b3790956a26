"""The clean room: a submission's tests run again where the student's code cannot reach the checks.

The notebook that runs is the instructor's source (its imports, specs and tests with the hidden
ones), with each answer cell replaced by the *definitions* of the student's answer: functions
(plain, or decorated with ``@cuda.jit``) whose bodies import nothing and touch no dunder names,
imports of numeric modules, and constants (literals, arithmetic, and number types and math functions of them, such
as ``float32(-math.inf)``, named as the instructor's cells import them). Anything else in an answer cell (another
call, a class, a patch of a checker) is left out, so a test passes here only on the merit of the definitions.
A notebook whose answers are all such definitions, kept whole, ran in the autograder exactly the code the clean
room would run: its scores stand and it is not run again (one run instead of two for most of a class).
`python -m gpucourse.classroom.clean_room COURSE ASSIGNMENT STUDENT` prints, as JSON, each test's
score in the autograded notebook and in the clean room, and (where the clean room ran) the first line of each
statement of the answers it left out.
"""

from __future__ import annotations

import ast
import copy
import json
import math
import sys
import tempfile
from pathlib import Path

import nbformat
from nbgrader.utils import determine_grade, is_grade, is_solution

from .autograde import SafeExecute, StderrIsOutput

MODULES = {"math", "cmath", "numpy", "numba", "numba.cuda", "warnings", "logging", "functools", "itertools", "sys"}
SYS_NAMES = {"stderr", "stdout"}  # all of `sys` an answer may use: printing to it must not cost a correct answer
FORBIDDEN_CALLS = {"exec", "eval", "compile", "open", "__import__", "getattr", "setattr", "delattr", "globals",
                   "locals", "vars", "input", "breakpoint"}
# What of NumPy reads or writes files, unpickles (runs any code a pickle names), compiles or reaches raw memory:
# an answer that names one is left out, however it reaches it (an attribute, an import, a constant that holds it)
FORBIDDEN_ATTRIBUTES = {"load", "save", "savez", "savez_compressed", "savetxt", "loadtxt", "genfromtxt", "fromfile",
                        "fromregex", "tofile", "dump", "memmap", "DataSource", "lib", "ctypeslib", "ctypes", "f2py",
                        "distutils", "allow_pickle"}  # (json's dumps and loads stay: JSON runs nothing)
# What leads from a kept name to the interpreter: the modules that NumPy, numba and logging hold as attributes
# (``cuda.os``, ``cuda.importlib``, ``numba.sys``, ``numba.cloudpickle``, ``np.testing.runstring`` ...), a frame's
# globals (``gen.gi_frame.f_globals``), and functools' setattr by name (``update_wrapper(check, f, ("__code__",))``)
REACHING_ATTRIBUTES = {"os", "sys", "importlib", "builtins", "pickle", "cloudpickle", "subprocess", "gc", "inspect",
                       "io", "shutil", "ctypes", "pathlib", "posix", "tempfile", "socket", "handlers", "linecache",
                       "traceback", "testing", "re", "enum", "gi_frame", "cr_frame", "ag_frame", "tb_frame", "f_back",
                       "f_globals", "f_locals", "f_builtins", "f_code", "update_wrapper", "wraps"}


def _grade_id(cell) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def _other_sys(node: ast.AST) -> bool:
    """Whether ``node`` uses ``sys`` for more than its output streams (``sys.modules``, ``sys.settrace`` ...)."""
    uses = [n for n in ast.walk(node) if isinstance(n, ast.Name) and n.id == "sys"]
    allowed = {id(n.value) for n in ast.walk(node)
               if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.attr in SYS_NAMES}
    return any(id(n) not in allowed for n in uses)


NUMBER_TYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                "uint64")
PURE_CALLS = {*NUMBER_TYPES, *(f"{module}.{name}" for module in ("np", "numpy", "numba") for name in NUMBER_TYPES),
              *(f"math.{name}" for name in dir(math) if not name.startswith("_"))}


def _pure_call(node: ast.Call, protected: set[str]) -> bool:
    """A call a constant may make: a number type or a math function (`PURE_CALLS`) named through a name that the
    instructor's cells bind (so the student's cannot rebind it), with positional arguments only."""
    callee = ast.unparse(node.func)
    return callee in PURE_CALLS and callee.split(".")[0] in protected and not node.keywords


def _forbidden(node: ast.AST) -> bool:
    """An attribute that is private (``_x``), in `FORBIDDEN_ATTRIBUTES` or in `REACHING_ATTRIBUTES`, or the keyword
    ``allow_pickle`` (a keyword ``save=`` or ``load=`` of the student's own function is no such thing)."""
    return (isinstance(node, ast.Attribute) and (node.attr.startswith("_") or node.attr in FORBIDDEN_ATTRIBUTES
                                                 or node.attr in REACHING_ATTRIBUTES)
            or isinstance(node, ast.keyword) and node.arg == "allow_pickle")


def _constant(node: ast.AST, protected: set[str] = frozenset()) -> bool:
    """Literals, tuples of them, names (``float32``), arithmetic on them, and `_pure_call`s of them
    (``float32(-math.inf)``): nothing else is called."""
    return not _other_sys(node) and all(
        isinstance(n, (ast.Constant, ast.Tuple, ast.List, ast.Name, ast.Load, ast.BinOp, ast.UnaryOp, ast.operator,
                       ast.unaryop, ast.Attribute)) and not _forbidden(n)
        or isinstance(n, ast.Call) and _pure_call(n, protected) for n in ast.walk(node))


def _clean_decorator(node: ast.expr) -> bool:
    """``cuda.jit`` or ``cuda.jit(...)`` with constant arguments."""
    target = node.func if isinstance(node, ast.Call) else node
    if ast.unparse(target) not in ("cuda.jit", "jit", "numba.cuda.jit"):
        return False
    return not isinstance(node, ast.Call) or all(map(_constant, [*node.args, *(k.value for k in node.keywords)]))


def _patches_attribute(target: ast.AST | None) -> bool:
    """Whether an assignment target writes to an attribute (``x.y = ...``, ``x.y[i] = ...``).

    An attribute inside an index only reads it: ``out[cuda.blockIdx.x] = ...`` writes ``out``.
    """
    if isinstance(target, (ast.Tuple, ast.List)):
        return any(map(_patches_attribute, target.elts))
    if isinstance(target, ast.Starred):
        return _patches_attribute(target.value)
    while isinstance(target, ast.Subscript):
        target = target.value
    return isinstance(target, ast.Attribute)


def _clean_body(function: ast.FunctionDef) -> bool:
    if _other_sys(function):
        return False
    for node in ast.walk(function):
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.ClassDef)):
            return False
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)) and any(
                _patches_attribute(target) for target in getattr(node, "targets", [getattr(node, "target", None)])):
            return False  # patching an attribute of something outside
        if isinstance(node, ast.Name) and (node.id.startswith("__") or node.id in FORBIDDEN_CALLS):
            return False
        if _forbidden(node):
            return False
    return True


def bound_names(source: str) -> set[str]:
    """The names a cell's top-level statements bind (imports, definitions, assignments)."""
    try:
        tree = ast.parse("\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))))
    except SyntaxError:
        return set()
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return names


def _kept(node: ast.stmt, protected: set[str]) -> bool:
    if bound_names(ast.unparse(node)) & protected:
        return False  # would replace a checker, a spec or an import of the instructor's cells
    if isinstance(node, ast.FunctionDef):
        defaults = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
        return all(map(_clean_decorator, node.decorator_list)) and all(map(_constant, defaults)) and _clean_body(node)
    if isinstance(node, ast.Import):
        return all(alias.name in MODULES for alias in node.names)
    if isinstance(node, ast.ImportFrom):
        names = {a.name for a in node.names}  # `*` would bind np.load, np.fromfile ... and rebind any name
        return node.level == 0 and node.module in MODULES and not names & (FORBIDDEN_ATTRIBUTES | REACHING_ATTRIBUTES
                                                                            | {"*"})
    if isinstance(node, ast.Assign):
        return all(isinstance(t, ast.Name) and not t.id.startswith("_") for t in node.targets) and \
            _constant(node.value, protected)
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)  # a docstring or a note


def _statements(source: str, protected: set[str]) -> list[tuple[ast.stmt, bool]] | None:
    """Each top-level statement of an answer cell and whether the clean room keeps it (None if it does not parse);
    an import of names the instructor's cells import already is dropped, neither kept nor left out."""
    try:
        tree = ast.parse("\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))))
    except SyntaxError:
        return None
    statements = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):  # names the instructor's cells import already come from there
            node.names = [a for a in node.names if (a.asname or a.name).split(".")[0] not in protected]
            if not node.names:
                continue
        statements.append((node, _kept(node, protected)))
    return statements


def definitions_only(source: str, protected: set[str] = frozenset()) -> str:
    """The definitions the clean room keeps from an answer cell's source ('' if it does not parse).

    ``protected`` names (those the instructor's cells bind) are never redefined.
    """
    statements = _statements(source, protected) or []
    return ast.unparse(ast.Module([node for node, kept in statements if kept], type_ignores=[]))


def left_out(source: str, protected: set[str] = frozenset()) -> list[str]:
    """The first line of each statement of an answer cell that the clean room leaves out (what an instructor
    reviewing a difference looks at first: a call such as ``NEG_INF = float32(-math.inf)``, or a patched check)."""
    statements = _statements(source, protected)
    if statements is None:
        return ["the whole cell (it does not parse)"] if source.strip() else []
    return [ast.unparse(node).splitlines()[0] for node, kept in statements if not kept]


def _answers(submitted) -> dict[str, str]:
    """Each answer cell's source by grade_id; of copies, the last one the student changed."""
    answers: dict[str, list[str]] = {}
    for cell in submitted.cells:
        if cell.cell_type == "code" and is_solution(cell) and _grade_id(cell):
            answers.setdefault(_grade_id(cell), []).append(cell.source)
    return {k: ([v for v in copies[1:] if v != copies[0]] or copies)[-1] for k, copies in answers.items()}


def instructor_names(source) -> set[str]:
    """The names the instructor's cells of ``source`` bind (imports, specs, checks): an answer may not rebind them."""
    return set().union(*[bound_names(c.source) for c in source.cells if c.cell_type == "code" and not is_solution(c)])


def clean_notebook(source, submitted):
    """The source notebook with each answer cell replaced by the definitions in the student's answer."""
    answers = _answers(submitted)
    notebook = copy.deepcopy(source)
    protected = instructor_names(notebook)
    for cell in notebook.cells:
        if cell.cell_type == "code" and is_solution(cell):
            cell.source = definitions_only(answers.get(_grade_id(cell), ""), protected)
    return notebook


def left_out_of(source, submitted) -> list[str]:
    """``<answer cell>: <first line>`` for each statement of the student's answers that the clean room leaves out."""
    protected = instructor_names(source)
    return [f"{grade_id}: {line}" for grade_id, answer in _answers(submitted).items()
            for line in left_out(answer, protected)]


def _same_statements(ran: str, kept: str) -> bool:
    try:
        return ast.dump(ast.parse(ran)) == ast.dump(ast.parse(kept))  # positions and comments aside
    except SyntaxError:  # a magic or shell line (`%time`, `!pip`), which the clean room leaves out
        return False


def same_code(autograded, clean) -> bool:
    """Whether the clean room would run the code cells the autograded notebook ran: the same cells (by their ids)
    in the same order, each the same statements (so every answer cell was definitions the clean room keeps whole)."""
    ran = [c for c in autograded.cells if c.cell_type == "code"]
    kept = [c for c in clean.cells if c.cell_type == "code"]
    return len(ran) == len(kept) and all(_grade_id(a) == _grade_id(b) and (
        a.source == b.source or _same_statements(a.source, b.source)) for a, b in zip(ran, kept))


def test_scores(notebook) -> dict[str, float]:
    """Points of every test cell of an executed notebook, as nbgrader scores them."""
    return {_grade_id(c): determine_grade(c)[0] for c in notebook.cells
            if c.cell_type == "code" and is_grade(c) and not is_solution(c)}


def _notebook_names(course: Path, assignment: str) -> list[str]:
    return sorted(p.stem for p in (course / "solutions" / assignment).glob("*.ipynb"))


def run(course: Path, assignment: str, student: str, **limits) -> dict:
    """Scores of each test in the autograded notebook and in the clean room, per notebook (the same scores where
    the clean room would run the same code: `same_code`)."""
    report = {}
    for name in _notebook_names(course, assignment):
        source = nbformat.read(course / "solutions" / assignment / f"{name}.ipynb", as_version=4)
        submitted = nbformat.read(course / "submitted" / student / assignment / f"{name}.ipynb", as_version=4)
        autograded = nbformat.read(course / "autograded" / student / assignment / f"{name}.ipynb", as_version=4)
        clean, scores = clean_notebook(source, submitted), test_scores(autograded)
        report[name] = {"autograded": scores, "clean_room": scores}
        if same_code(autograded, clean):
            continue
        with tempfile.TemporaryDirectory(prefix="clean-room-") as workdir:
            executor = SafeExecute(course_root=str(course), **limits)
            executed, _ = executor.preprocess(clean, {"metadata": {"path": workdir}})
            StderrIsOutput().preprocess(executed, {})
        report[name]["clean_room"] = test_scores(executed)
        report[name]["left_out"] = left_out_of(source, submitted)
    return report


def main(argv: list[str]) -> None:
    course, assignment, student, *options = argv
    limits = dict(option.lstrip("-").split("=", 1) for option in options)
    print(json.dumps(run(Path(course), assignment, student, **{k: int(v) for k, v in limits.items()})))


if __name__ == "__main__":
    main(sys.argv[1:])
