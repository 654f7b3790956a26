"""Rewrite a kernel's Python so one call runs every thread of a launch at once.

Each statement of the rewritten function runs once for all threads, with values
held as NumPy arrays of one element per thread (lane) and a mask of the lanes
that execute it. The rewrite makes control flow and memory access go through
the runtime (``_g_rt``), which keeps that mask:

- ``if`` narrows the mask for each branch; loops iterate while any lane is in;
  ``return``, ``break`` and ``continue`` take lanes out, and the statements after
  one that may have done so run only while some lane is left;
- assignments inside branches and loops merge into the lanes that execute them;
- ``a[i]`` loads, stores and every call go through the runtime, which checks
  bounds, races and barriers and records the trace;
- ``and``, ``or``, ``x if c else y`` and chained comparisons evaluate their
  right side only in the lanes that need it, as on a GPU;
- arithmetic, bitwise, comparison and unary operators go through the runtime,
  which computes them in the types numba gives them (`arithmetic`);
- a value assigned to a variable is converted to the type numba's compilation
  gives that variable, when the launch knows it (or, where the versions its
  reads see have different types, to this assignment's version's:
  `assignment_keys`, and each such read to the version's it reads:
  `read_keys`), and so are the result of an operation numba types wider than
  it computes it (`operation_keys`) and a function's return value.

Each memory access and call site gets a `Site` (function, line, source text) so
that an error names the line the student wrote.
"""

from __future__ import annotations

import ast
import collections
import dis
import functools
import inspect
import itertools
import linecache
import sys
import textwrap
from dataclasses import dataclass

from .arithmetic import BINARY, READS, RETURNED, UNARY, assignment_key, method_name, operation_key, read_key
from .errors import UnsupportedInKernel, fault

RT = "_g_rt"
CALL = "_g_call"
UNDEFINED = "_g_U"
FUNCTION = "_g_function"  # the Python function a rewrite comes from, the key of its variable types
TYPES = "_g_types"
PLAIN = "_g_plain"  # true where no read of the function is keyed (`read_keys`): every read takes the value as it is
# `trace.lines_run`'s markers: ``_g_mark(k)`` starts (or resumes) stretch ``k`` of code that runs whole once begun (a
# block, up to its next nested block), ``_g_marked(k, value)`` is a lambda's (`and`, `or`, `if`-`else` operands)
MARK, MARKED = "_g_mark", "_g_marked"
_stretches = itertools.count()


@dataclass(frozen=True)
class Site:
    """Where a memory access or call is in the student's source."""

    function: str
    filename: str
    line: int
    source: str
    expression: str
    target: str | None = None  # the variable a shared/local array is assigned to

    def describe(self) -> str:
        return f"line {self.line}: {self.source.strip()}"


SITES: list[Site] = []


def _register(site: Site) -> int:
    SITES.append(site)
    return len(SITES) - 1


def _call(name: str, *args: ast.expr) -> ast.Call:
    return ast.Call(ast.Attribute(ast.Name(RT, ast.Load()), name, ast.Load()), list(args), [])


def _operation(operator: ast.AST, *operands: ast.expr) -> ast.expr | None:
    """The runtime call computing ``operator`` on ``operands`` in numba's types (None for ``is``, ``in``, ``@``)."""
    name = type(operator).__name__
    if name not in BINARY and name not in UNARY:
        return None
    return _call(method_name(name), *operands)


def _binary(left: ast.expr, operator: ast.operator, right: ast.expr) -> ast.expr:
    return _operation(operator, left, right) or ast.BinOp(left, operator, right)


def _compare(left: ast.expr, operator: ast.cmpop, right: ast.expr) -> ast.expr:
    return _operation(operator, left, right) or ast.Compare(left, [operator], [right])


def _lambda(body: ast.expr) -> ast.Lambda:
    """``lambda: body``, marked as a stretch of its own (it runs only where a thread needs its value)."""
    empty = ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
    marked = ast.Call(ast.Name(MARKED, ast.Load()), [ast.Constant(next(_stretches)), body], [])
    return ast.Lambda(empty, marked)


def _mark(stretch: int, where: ast.stmt) -> ast.stmt:
    """``_g_mark(stretch)`` on the first line of ``where``."""
    call = ast.Call(ast.Name(MARK, ast.Load()), [ast.Constant(stretch)], [])
    marker = ast.Expr(call)
    for node in (marker, call, call.func, *call.args):
        node.lineno = node.end_lineno = where.lineno
        node.col_offset = node.end_col_offset = where.col_offset
    return marker


def _constant_test(test: ast.expr) -> bool:
    """Whether numba drops the side of ``a if test else b`` that ``test`` never takes before typing it: a test of
    literals only (CPython folds it, or numba's dead-branch pruning does), or ``and`` with a false literal, ``or``
    with a true one. Otherwise the result has both sides' types unified, whichever side a thread takes."""
    if isinstance(test, ast.Constant):
        return True
    if isinstance(test, ast.UnaryOp):
        return _constant_test(test.operand)
    if isinstance(test, ast.BinOp):
        return _constant_test(test.left) and _constant_test(test.right)
    if isinstance(test, ast.Compare):
        return all(map(_constant_test, [test.left, *test.comparators]))
    if isinstance(test, ast.BoolOp):
        decides = isinstance(test.op, ast.Or)  # the literal that decides the test on its own
        return all(map(_constant_test, test.values)) or any(
            isinstance(v, ast.Constant) and bool(v.value) == decides for v in test.values)
    return False


def _exits(node: ast.AST, loops: bool) -> bool:
    """Whether ``node`` contains a return (or, with ``loops``, a break/continue) outside nested loops."""
    kinds = (ast.Return, ast.Break, ast.Continue) if loops else (ast.Return,)
    if isinstance(node, kinds):
        return True
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.Lambda)):
            continue
        inner_loops = loops and not isinstance(child, (ast.For, ast.While))
        if _exits(child, inner_loops):
            return True
    return False


def may_remove_lanes(statement: ast.stmt) -> bool:
    """After this statement some lanes may have left the current block."""
    if isinstance(statement, (ast.For, ast.While)):
        return _exits(statement, loops=False)
    return _exits(statement, loops=True)


def _record_field(target: ast.expr) -> str | None:
    """``x`` of the assignment targets ``r[i].x`` and ``r[i]['x']`` (a field of a record array), else None."""
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Subscript):
        return target.attr
    if (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Subscript)
            and isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str)):
        return target.slice.value
    return None


def _evaluation_order(node: ast.AST):
    """``node`` and its sub-nodes, each after its operands, in the order Python evaluates them (an assignment's
    value before its targets)."""
    if isinstance(node, ast.Assign):
        children = [node.value, *node.targets]
    elif isinstance(node, ast.AnnAssign):
        children = [node.value, node.target]
    else:
        children = list(ast.iter_child_nodes(node))
    for child in children:
        if child is not None:
            yield from _evaluation_order(child)
    yield node


def _folded(node: ast.expr) -> bool:
    """Whether CPython computes ``node`` when it compiles the function (an operation on constants): nothing runs."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp) and not isinstance(node.op, ast.Not):
        return _folded(node.operand)
    return isinstance(node, ast.BinOp) and _folded(node.left) and _folded(node.right)


def _versioned_names(tree: ast.FunctionDef) -> set[str]:
    """The variables numba may see with several types while it infers them: assigned twice or more, in a loop, a
    parameter assigned again, or assigned a value that reads one of those (``w = v`` and ``x = abs(v)`` take their
    types one after another from ``v``'s)."""
    def stored(node: ast.AST) -> list[str]:
        return [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]

    stores = collections.Counter(stored(tree))
    in_loops = {name for loop in ast.walk(tree) if isinstance(loop, (ast.For, ast.While)) for name in stored(loop)}
    parameters = {a.arg for a in tree.args.args}
    versioned = {name for name, count in stores.items() if count > 1 or name in in_loops or name in parameters}
    flows = []  # (the names a statement assigns, the names its value reads)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            flows.append(({n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)
                           and isinstance(n.ctx, ast.Store)},
                          {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}))
    grown = True
    while grown:
        grown = False
        for assigned, read in flows:
            if read & versioned and not assigned <= versioned:
                versioned |= assigned
                grown = True
    return versioned


def _operation_kind(node: ast.AST) -> str | None:
    """What `operation_key` calls the operation ``node`` computes when the function runs (``Add``, ``USub``,
    ``Call``), as `run.ptx._widened_operations` names numba's; None for any other node."""
    if isinstance(node, ast.BinOp) and type(node.op).__name__ in BINARY and not _folded(node):
        return type(node.op).__name__
    if isinstance(node, ast.UnaryOp) and type(node.op).__name__ in UNARY and not _folded(node):
        return type(node.op).__name__
    if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id == "print"):
        return "Call"  # (numba makes a print a statement of its own, no call)
    return None


def _keyed(placed: list, key) -> dict[int, str]:
    """{id of each node: ``key(*where, ordinal, count)``} for ``placed``, (node, where) pairs in the order they run:
    a node's ordinal among those of its ``where`` (a kind of operation or a variable, and a line), and their count."""
    counts, seen, keys = collections.Counter(where for _, where in placed), collections.Counter(), {}
    for node, where in placed:
        keys[id(node)] = key(*where, seen[where], counts[where])
        seen[where] += 1
    return keys


def operation_keys(tree: ast.FunctionDef, versioned: set[str]) -> dict[int, str]:
    """{id of an operation: its `operation_key`} for the operations of ``tree`` (binary and unary operators, calls)
    that read a variable numba may widen the result of (``versioned``, `_versioned_names`; see
    `run.ptx._widened_operations`), counted per kind and line in the order they run."""
    operations = [(node, (kind, node.lineno)) for statement in tree.body for node in _evaluation_order(statement)
                  if (kind := _operation_kind(node)) is not None]
    keys = _keyed(operations, operation_key)
    return {id(node): keys[id(node)] for node, _ in operations
            if any(isinstance(n, ast.Name) and n.id in versioned for n in ast.walk(node))}


def assignment_keys(tree: ast.FunctionDef) -> dict[int, str]:
    """{id of an assigned name: its `assignment_key`}: the assignments to each variable counted per line in the order
    they run, as `run.ptx._assignment_types` counts numba's."""
    return _keyed([(node, (node.id, node.lineno)) for statement in tree.body for node in _evaluation_order(statement)
                   if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)], assignment_key)


def read_keys(tree: ast.FunctionDef, versioned: set[str]) -> dict[int, str]:
    """{id of a read of a variable numba may see with several types (``versioned``, `_versioned_names`): its
    `read_key`}: the reads of each variable counted per line in the order they run, as `run.ptx._reads` counts
    numba's (``v += x`` reads ``v`` first)."""
    updated = {id(node.target) for node in ast.walk(tree) if isinstance(node, ast.AugAssign)}
    return _keyed([(node, (node.id, node.lineno)) for statement in tree.body for node in _evaluation_order(statement)
                   if isinstance(node, ast.Name) and node.id in versioned
                   and (isinstance(node.ctx, ast.Load) or id(node) in updated)], read_key)


class KernelRewriter:
    """Rewrites one function definition (kernel or device function)."""

    def __init__(self, tree: ast.FunctionDef, filename: str, lines: list[str]):
        self.tree = tree
        self.filename = filename
        self.lines = lines
        self.counter = 0
        self.function = tree.name
        versioned = _versioned_names(tree)  # before the rewrite: the keys name the source's own nodes
        self.operation_keys = operation_keys(tree, versioned)
        self.assignment_keys = assignment_keys(tree)
        self.read_keys = read_keys(tree, versioned)

    # -- helpers -----------------------------------------------------------------
    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"_g_{stem}{self.counter}"

    def site(self, node: ast.AST, target: str | None = None) -> ast.Constant:
        line = getattr(node, "lineno", self.tree.lineno)
        source = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return ast.Constant(_register(Site(self.function, self.filename, line, source, ast.unparse(node), target)))

    def widened(self, key: str | None, computed: ast.expr) -> ast.expr:
        """``computed`` converted to the type numba gives the result of the operation `operation_keys` names
        ``key`` where that is wider than the operation (`run.ptx._widened_operations`); as it is without a key."""
        if key is None:
            return computed
        return _call("assigned", ast.Name(TYPES, ast.Load()), ast.Constant(key), computed)

    def read(self, node: ast.Name) -> ast.expr:
        """A read of a variable: converted to the type of the version numba reads there, where that is keyed
        (`read_keys`, or the line's `read_key` for all its reads; only in a function that has such reads)."""
        key = self.read_keys.get(id(node))
        name = ast.Name(node.id, ast.Load())
        if key is None:
            return name
        line = ast.Constant(read_key(node.id, node.lineno))
        return ast.IfExp(ast.Name(PLAIN, ast.Load()), name, _call("assigned", ast.Name(TYPES, ast.Load()), line,
                                                                  ast.Name(node.id, ast.Load()), ast.Constant(key)))

    def unsupported(self, node: ast.AST, what: str) -> UnsupportedInKernel:
        line = getattr(node, "lineno", self.tree.lineno)
        source = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        return fault(UnsupportedInKernel, f"kernel `{self.function}`, line {line}: {source}",
                     f"{what} is not supported in kernels by the course simulator")

    # -- expressions -------------------------------------------------------------
    def expr(self, node: ast.expr, target: str | None = None) -> ast.expr:
        rewriter = self

        class Expressions(ast.NodeTransformer):
            def visit_Subscript(self, node):
                if not isinstance(node.ctx, ast.Load):
                    return node
                site = rewriter.site(node)
                parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
                if not any(isinstance(part, ast.Slice) for part in parts):
                    return _call("load", self.visit(node.value), self.visit(node.slice), site)
                index = [self.bounds(part, site) if isinstance(part, ast.Slice) else self.visit(part) for part in parts]
                index = ast.Tuple(index, ast.Load()) if isinstance(node.slice, ast.Tuple) else index[0]
                return _call("view", self.visit(node.value), index, site)

            def bounds(self, node: ast.Slice, site: ast.Constant) -> ast.Call:
                """``start:stop:step`` as a runtime call that checks the threads agree on them."""
                return _call("slice_of", site, *(ast.Constant(None) if bound is None else self.visit(bound)
                                                 for bound in (node.lower, node.upper, node.step)))

            def visit_Slice(self, node):  # a slice outside a loaded subscript: an assignment target
                raise rewriter.unsupported(node, "assigning to a slice of an array (a[1:3] = ...); assign element by element")

            def visit_BoolOp(self, node):
                values = [self.visit(v) for v in node.values]
                name = "and_" if isinstance(node.op, ast.And) else "or_"
                return _call(name, values[0], *[_lambda(v) for v in values[1:]])

            def visit_BinOp(self, node):
                key = rewriter.operation_keys.get(id(node))
                node = self.generic_visit(node)
                return rewriter.widened(key, _binary(node.left, node.op, node.right))

            def visit_Compare(self, node):
                node = self.generic_visit(node)
                parts, left = [], node.left
                for op, right in zip(node.ops, node.comparators):
                    parts.append(_compare(left, op, right))
                    left = right
                if len(parts) == 1:
                    return parts[0]
                return _call("and_", parts[0], *[_lambda(p) for p in parts[1:]])

            def visit_UnaryOp(self, node):
                key = rewriter.operation_keys.get(id(node))
                node = self.generic_visit(node)
                if isinstance(node.op, ast.Not):
                    return _call("not_", node.operand)
                return rewriter.widened(key, _operation(node.op, node.operand) or node)

            def visit_IfExp(self, node):
                pruned = _constant_test(node.test)
                node = self.generic_visit(node)
                return _call("ifexp", node.test, _lambda(node.body), _lambda(node.orelse), ast.Constant(pruned))

            def visit_Call(self, node):
                call = ast.Call(
                    ast.Name(CALL, ast.Load()),
                    [rewriter.site(node, target), self.visit(node.func)] + [self.visit(a) for a in node.args],
                    [ast.keyword(k.arg, self.visit(k.value)) for k in node.keywords],
                )
                return rewriter.widened(rewriter.operation_keys.get(id(node)), call)

            def visit_Name(self, node):
                return rewriter.read(node) if isinstance(node.ctx, ast.Load) else node

            def visit_NamedExpr(self, node):
                raise rewriter.unsupported(node, "the walrus operator :=")

            def visit_Lambda(self, node):
                raise rewriter.unsupported(node, "lambda")

        return Expressions().visit(node)

    # -- statements --------------------------------------------------------------
    def block(self, statements: list[ast.stmt], nested: bool) -> list[ast.stmt]:
        """The rewritten ``statements``, marked (`MARK`) at the start and again after each nested block."""
        stretch = next(_stretches)
        out: list[ast.stmt] = [_mark(stretch, statements[0])] if statements else []
        for position, statement in enumerate(statements):
            out.extend(self.statement(statement, nested))
            rest = statements[position + 1 :]
            if rest and isinstance(statement, (ast.If, ast.For, ast.While)):
                out.append(_mark(stretch, rest[0]))
            if rest and may_remove_lanes(statement):
                guard = ast.If(ast.Attribute(ast.Name(RT, ast.Load()), "any", ast.Load()), self.block(rest, nested), [])
                out.append(ast.copy_location(guard, rest[0]))
                break
        return out or [ast.Pass()]

    def assign_name(self, target: ast.Name, value: ast.expr, nested: bool) -> ast.stmt:
        name, key = target.id, self.assignment_keys.get(id(target))
        site = [ast.Constant(key)] if key is not None else []
        if nested:
            value = _call("merge_assigned", ast.Name(name, ast.Load()), ast.Name(TYPES, ast.Load()), ast.Constant(name),
                          value, *site)
        else:
            value = _call("assigned", ast.Name(TYPES, ast.Load()), ast.Constant(name), value, *site)
        return ast.Assign([ast.Name(name, ast.Store())], value)

    def assign(self, target: ast.expr, value: ast.expr, nested: bool, node: ast.stmt) -> list[ast.stmt]:
        if isinstance(target, ast.Name):
            return [self.assign_name(target, value, nested)]
        field = _record_field(target)
        # the site first: rewriting the index below changes the target's nodes in place
        site = self.site(target) if isinstance(target, (ast.Subscript, ast.Attribute)) else None
        if field is not None:
            element = target.value
            store = _call("store", self.expr(element.value), self.expr(element.slice), value, site, ast.Constant(field))
            return [ast.Expr(store)]
        if isinstance(target, ast.Subscript):
            store = _call("store", self.expr(target.value), self.expr(target.slice), value, site)
            return [ast.Expr(store)]
        if isinstance(target, ast.Attribute):  # r.x = v of a record argument
            store = _call("store", self.expr(target.value), ast.Constant(target.attr), value, site)
            return [ast.Expr(store)]
        if isinstance(target, (ast.Tuple, ast.List)):
            temp, count = self.fresh("t"), len(target.elts)
            literal = isinstance(value, (ast.Tuple, ast.List))  # `a, b = b, a`: a tuple, no runtime needed
            unpacked = value if literal else _call("unpacked", value, ast.Constant(count), self.site(node))
            out = [ast.Assign([ast.Name(temp, ast.Store())], unpacked)]
            for k, element in enumerate(target.elts):
                item = (ast.Subscript(ast.Name(temp, ast.Load()), ast.Constant(k), ast.Load()) if literal
                        else _call("item", ast.Name(temp, ast.Load()), ast.Constant(k), self.site(node)))
                out.extend(self.assign(element, item, nested, node))
            return out
        raise self.unsupported(node, f"assigning to `{ast.unparse(target)}`")

    def statement(self, node: ast.stmt, nested: bool) -> list[ast.stmt]:
        out = self._statement(node, nested)
        for new in out:
            ast.copy_location(new, node)
        return out

    def _statement(self, node: ast.stmt, nested: bool) -> list[ast.stmt]:
        if isinstance(node, ast.Assign):
            target = node.targets[0].id if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) else None
            value = self.expr(node.value, target)
            if len(node.targets) == 1:
                return self.assign(node.targets[0], value, nested, node)
            temp = self.fresh("t")
            out = [ast.Assign([ast.Name(temp, ast.Store())], value)]
            for target in node.targets:
                out.extend(self.assign(target, ast.Name(temp, ast.Load()), nested, node))
            return out
        if isinstance(node, ast.AnnAssign):
            if node.value is None:
                return [ast.Pass()]
            return self.assign(node.target, self.expr(node.value), nested, node)
        if isinstance(node, ast.AugAssign):
            return self.augmented(node, nested)
        if isinstance(node, ast.Expr):
            return [ast.Expr(self.expr(node.value))]
        if isinstance(node, ast.If):
            return self.branch(node, nested)
        if isinstance(node, ast.For):
            return self.for_loop(node)
        if isinstance(node, ast.While):
            return self.while_loop(node)
        if isinstance(node, ast.Return):
            value = self.expr(node.value) if node.value is not None else ast.Constant(None)
            value = self.widened(RETURNED, value)  # numba's return type, which unifies every return's
            return [ast.Expr(_call("ret", value, self.site(node)))]  # the site: where threads that exit left
        if isinstance(node, ast.Break):
            return [ast.Expr(_call("brk"))]
        if isinstance(node, ast.Continue):
            return [ast.Expr(_call("cont"))]
        if isinstance(node, ast.Raise) and node.exc is not None:
            return [ast.Raise(_call("raised", self.expr(node.exc)), None)]
        if isinstance(node, (ast.Pass, ast.Assert)):
            return [ast.Pass()]  # numba-cuda compiles assert away unless debug=True
        raise self.unsupported(node, f"`{type(node).__name__.lower()}` statement")

    def augmented(self, node: ast.AugAssign, nested: bool) -> list[ast.stmt]:
        value = self.expr(node.value)
        if isinstance(node.target, ast.Name):
            current = _binary(self.read(node.target), node.op, value)
            return [self.assign_name(node.target, current, nested)]
        if isinstance(node.target, ast.Subscript):
            array, index = self.fresh("a"), self.fresh("i")
            site = self.site(node.target)
            loaded = _call("load", ast.Name(array, ast.Load()), ast.Name(index, ast.Load()), site)
            return [
                ast.Assign([ast.Name(array, ast.Store())], self.expr(node.target.value)),
                ast.Assign([ast.Name(index, ast.Store())], self.expr(node.target.slice)),
                ast.Expr(
                    _call("store", ast.Name(array, ast.Load()), ast.Name(index, ast.Load()),
                          _binary(loaded, node.op, value), site)
                ),
            ]
        raise self.unsupported(node, f"`{ast.unparse(node.target)} {ast.unparse(node.op)}=`")

    def branch(self, node: ast.If, nested: bool) -> list[ast.stmt]:
        if not node.orelse and len(node.body) == 1 and isinstance(node.body[0], (ast.Break, ast.Continue)):
            leave = "brk_if" if isinstance(node.body[0], ast.Break) else "cont_if"  # ``if c: break`` in one call
            return [ast.Expr(_call(leave, self.expr(node.test)))]
        saved, condition = self.fresh("s"), self.fresh("c")
        out = [
            ast.Assign([ast.Name(condition, ast.Store())], self.expr(node.test)),
            ast.Assign([ast.Name(saved, ast.Store())], _call("branch", ast.Name(condition, ast.Load()))),
            ast.If(ast.Attribute(ast.Name(RT, ast.Load()), "any", ast.Load()), self.block(node.body, True), []),
            ast.Expr(_call("pop", ast.Name(saved, ast.Load()))),
        ]
        if node.orelse:
            out += [
                ast.If(
                    _call("narrow_not", ast.Name(condition, ast.Load())),
                    self.block(node.orelse, True),
                    [],
                ),
                ast.Expr(_call("pop", ast.Name(saved, ast.Load()))),
            ]
        return out

    def for_loop(self, node: ast.For) -> list[ast.stmt]:
        if node.orelse:
            raise self.unsupported(node, "for ... else")
        call = node.iter
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "range"
                and not call.keywords and 1 <= len(call.args) <= 3):
            iterate = _call("loop_range", *[self.expr(a) for a in call.args])
        else:
            iterate = _call("loop_items", self.expr(call), self.site(call))
        value = self.fresh("v")
        loop = ast.For(
            ast.Name(value, ast.Store()),
            iterate,
            self.assign(node.target, ast.Name(value, ast.Load()), True, node) + self.block(node.body, True),
            [],
        )
        return [loop]

    def while_loop(self, node: ast.While) -> list[ast.stmt]:
        if node.orelse:
            raise self.unsupported(node, "while ... else")
        test = ast.If(ast.UnaryOp(ast.Not(), _call("while_test", self.expr(node.test))), [ast.Continue()], [])
        loop = ast.For(ast.Name("_", ast.Store()), _call("loop_while"), [test] + self.block(node.body, True), [])
        return [loop]

    # -- the function ------------------------------------------------------------
    def function_def(self) -> ast.FunctionDef:
        tree = self.tree
        parameters = {a.arg for a in tree.args.args}
        assigned = sorted(
            {
                n.id
                for n in ast.walk(tree)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id not in parameters
            }
        )
        frame = self.fresh("f")
        prologue = [ast.Assign([ast.Name(frame, ast.Store())], _call("enter")),
                    ast.Assign([ast.Name(TYPES, ast.Store())],
                               _call("types_of", ast.Name(FUNCTION, ast.Load()),
                                     ast.Tuple([ast.Name(a.arg, ast.Load()) for a in tree.args.args], ast.Load()))),
                    ast.Assign([ast.Name(PLAIN, ast.Store())],
                               ast.Compare(ast.Constant(READS), [ast.NotIn()], [ast.Name(TYPES, ast.Load())]))]
        if assigned:
            prologue.append(
                ast.Assign([ast.Name(n, ast.Store()) for n in assigned], ast.Name(UNDEFINED, ast.Load()))
            )
        body = self.block(tree.body, False)
        epilogue = [ast.Return(_call("leave", ast.Name(frame, ast.Load())))]
        for statement in prologue + epilogue:
            ast.copy_location(statement, tree)
        tree.body = prologue + body + epilogue
        tree.decorator_list = []
        tree.returns = None
        return tree


# stretch -> (the lines its code starts, every line its code object starts): `trace.lines_run` reads them
STRETCHES: dict[int, tuple[frozenset, frozenset]] = {}


def register_stretches(code) -> None:
    """`STRETCHES` of the compiled rewrite ``code`` and the code objects in it: each line start of a code object
    belongs to the stretch whose marker comes last before it in the code (a marker starts or resumes its stretch,
    and the code between two markers runs whole, so a line runs where its stretch does)."""
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            register_stretches(const)
    instructions = [i for i in dis.get_instructions(code) if i.opname != "EXTENDED_ARG"]
    markers = [(a.offset, b.argval) for a, b in zip(instructions, instructions[1:])
               if a.opname == "LOAD_GLOBAL" and a.argval in (MARK, MARKED) and b.opname == "LOAD_CONST"]
    if not markers:
        return
    starts = [(offset, line) for offset, line in dis.findlinestarts(code) if line]
    every, lines, k = frozenset(line for _, line in starts), collections.defaultdict(set), 0
    current = markers[0][1]  # the prologue (the def's line) runs with the first stretch
    for offset, line in starts:
        while k < len(markers) and markers[k][0] <= offset:
            current, k = markers[k][1], k + 1
        lines[current].add(line)
    for _, stretch in markers:
        STRETCHES[stretch] = (frozenset(lines[stretch]), every)


def _lambda_as_def(module: ast.Module, py_func) -> ast.FunctionDef | None:
    """The ``def`` a lambda of these lines with ``py_func``'s arguments stands for (``cuda.reduce(lambda a, b: a + b)``)."""
    code = py_func.__code__
    names = list(code.co_varnames[: code.co_argcount])
    for node in ast.walk(module):
        if isinstance(node, ast.Lambda) and [a.arg for a in node.args.args] == names:
            return ast.copy_location(
                ast.FunctionDef(py_func.__name__, node.args, [ast.copy_location(ast.Return(node.body), node.body)], [],
                                None, type_params=[]), node)
    return None


def has_source(py_func) -> bool:
    """Whether the source of ``py_func`` can be found (not for a function built by ``exec`` from a string)."""
    return _source_found(py_func.__code__)


@functools.lru_cache(maxsize=4096)
def _source_found(code) -> bool:  # once per function: finding the source tokenizes its file
    if code.co_filename == "<string>":
        _remember_python_c_program()
    try:
        lines, _ = inspect.getsourcelines(code)
    except (OSError, TypeError):
        return False
    if code.co_filename != "<string>" or code.co_name == "<lambda>":
        return True
    # "<string>" is also the name of every string given to exec: the lines found must start this very function
    # (inspect skips ahead to the next def when the line it is given starts none)
    try:
        first = ast.parse(textwrap.dedent("".join(lines))).body[:1]
    except SyntaxError:
        return False
    return bool(first) and isinstance(first[0], ast.FunctionDef) and first[0].name == code.co_name


def _remember_python_c_program() -> None:
    """Put the program of ``python -c PROGRAM`` in linecache as ``<string>``, where inspect looks for the source of
    its functions: Python keeps no copy of it, Linux's /proc/self/cmdline does."""
    if "<string>" in linecache.cache or sys.argv[:1] != ["-c"]:
        return
    try:
        arguments = open("/proc/self/cmdline", "rb").read().split(b"\0")
        program = arguments[arguments.index(b"-c") + 1].decode()
    except (OSError, ValueError, IndexError, UnicodeDecodeError):
        return
    linecache.cache["<string>"] = (len(program), None, program.splitlines(keepends=True), "<string>")


def rewrite(py_func) -> tuple[ast.Module, str]:
    """The rewritten module source tree of ``py_func`` and its filename."""
    try:
        if not has_source(py_func):
            raise OSError("no source file holds it")
        lines, first = inspect.getsourcelines(py_func)
        filename = inspect.getsourcefile(py_func) or py_func.__code__.co_filename
    except (OSError, TypeError) as exc:
        raise UnsupportedInKernel(
            f"the course simulator needs the source of `{py_func.__name__}` and cannot find it ({exc}); "
            "define kernels in a notebook cell or a .py file"
        ) from None
    source = textwrap.dedent("".join(lines))
    module = ast.parse(source)
    ast.increment_lineno(module, first - 1)
    tree = next((n for n in module.body if isinstance(n, ast.FunctionDef)), None) or _lambda_as_def(module, py_func)
    if tree is None:
        raise UnsupportedInKernel(f"`{py_func.__name__}` is not a `def`: write kernels and device functions with def")
    file_lines = [""] * (first - 1) + [line.rstrip("\n") for line in lines]
    new = KernelRewriter(tree, filename, file_lines).function_def()
    return _locate_made_nodes(ast.Module([new], [])), filename


def _locate_made_nodes(node: ast.AST, line: int = 1, column: int = 0) -> ast.AST:
    """Put each node the rewrite made where the nearest source node above it starts, on that one line (not over its
    lines, as `ast.fix_missing_locations` does): CPython puts a method call on the last line of its attribute, so a
    ``_g_rt.load(...)`` failing in an ``if``, ``while`` or ``for`` header would name the last line of the body."""
    if "lineno" in node._attributes:
        if getattr(node, "lineno", None) is None:
            node.lineno, node.col_offset, node.end_lineno, node.end_col_offset = line, column, line, column
        else:
            line, column = node.lineno, node.col_offset
    for child in ast.iter_child_nodes(node):
        _locate_made_nodes(child, line, column)
    return node

