"""`Session`'s shape (issue 43, "a thin Session"), read from the source with `ast`.

* Few pass-throughs. A pass-through is a member of `Session` (a method, a property's getter
  or setter) whose body, docstring aside, is one statement that only forwards: a call of a
  collaborator's method, of one of its own or of a function (`self.x.f(a)`, `self.f(a)`,
  `f(self, a)`, awaited or not), or a read or write of a collaborator's attribute
  (`self.x.y`, `self.x.y = a`), with nothing but the function's own parameters (and
  constants) as arguments. DESIGN.md's public contract may keep some; at most
  `MAX_PASS_THROUGHS` in all.
* Helpers take what they use. No module of `runtime/session/` or `runtime/batch/` but
  `session.py` takes the session: none imports `Session`, has a parameter named `session`
  or `host` or annotated with `Session`, or declares a Protocol that stands for it (one
  whose members are all `Session`'s).
* Parts take few collaborators. No class of `runtime/session/`, `runtime/batch/` or
  `runtime/workers/` takes more than `MAX_PARAMETERS` constructor parameters (its
  `__init__`'s positional and keyword-only ones, `self` aside): a part that needs more does
  two jobs, or takes values an object it could be given already owns. A dataclass's fields
  are a record's, not collaborators, and are not counted.
"""

from __future__ import annotations

import ast
from pathlib import Path

import forkagent_jupyter.runtime as runtime

RUNTIME = Path(runtime.__file__).parent
SESSION = RUNTIME / "session" / "session.py"
HELPERS = [
    p
    for folder in ("session", "batch")
    for p in sorted((RUNTIME / folder).rglob("*.py"))
    if p != SESSION
]
MAX_PASS_THROUGHS = 10
MAX_PARAMETERS = 6
PARTS = [
    p
    for folder in ("session", "batch", "workers")
    for p in sorted((RUNTIME / folder).rglob("*.py"))
]


def session_class() -> ast.ClassDef:
    tree = ast.parse(SESSION.read_text(encoding="utf-8"))
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Session")


def chain(node: ast.expr) -> list[str] | None:
    """`self.a.b` as ["a", "b"]; None for anything not rooted at `self`."""
    names: list[str] = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id == "self":
        return names[::-1]
    return None


def only_parameters(values: list[ast.expr], params: set[str]) -> bool:
    for value in values:
        if isinstance(value, ast.Starred):
            value = value.value
        if isinstance(value, ast.Constant):
            continue
        if not (isinstance(value, ast.Name) and value.id in params):
            return False
    return True


def forwards(expr: ast.expr, params: set[str]) -> bool:
    """Whether `expr` only forwards (see the module doc)."""
    if isinstance(expr, ast.Await):
        expr = expr.value
    if isinstance(expr, ast.Call):
        target = chain(expr.func)
        if not (target or isinstance(expr.func, ast.Name)):
            return False
        arguments = [*expr.args, *(k.value for k in expr.keywords)]
        return only_parameters(arguments, params)
    names = chain(expr)
    return names is not None and len(names) >= 2  # a collaborator's attribute


def is_pass_through(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    if len(body) != 1:
        return False
    a = fn.args
    params = {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]}
    params |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
    [statement] = body
    if isinstance(statement, (ast.Return, ast.Expr)) and statement.value is not None:
        return forwards(statement.value, params)
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target = chain(statement.targets[0])
        return (
            target is not None and len(target) >= 2 and only_parameters([statement.value], params)
        )
    return False


def member_name(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    setter = any(isinstance(d, ast.Attribute) and d.attr == "setter" for d in fn.decorator_list)
    return f"{fn.name} (setter)" if setter else fn.name


def pass_throughs() -> list[str]:
    return [
        member_name(node)
        for node in session_class().body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and not (node.name.startswith("__") and node.name.endswith("__"))
        and is_pass_through(node)
    ]


def session_members() -> set[str]:
    """The names a Session has: its class body's and what `self.<name> = ...` sets."""
    cls = session_class()
    names: set[str] = set()
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    for node in ast.walk(cls):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        for target in targets:
            for part in ast.walk(target):
                names_ = chain(part) if isinstance(part, ast.Attribute) else None
                if names_ and len(names_) == 1:
                    names.add(names_[0])
    return names


def protocol_members(cls: ast.ClassDef) -> set[str]:
    members: set[str] = set()
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            members.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            members.add(node.target.id)
    return members


def takes_the_session(path: Path, members: set[str]) -> list[str]:
    """How the module at `path` takes the session, one line each (none: [])."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "Session" for a in node.names):
            found.append(f"line {node.lineno}: imports Session")
        elif isinstance(node, ast.arg):
            shown = ast.unparse(node.annotation) if node.annotation is not None else ""
            if node.arg in ("session", "host") or "Session" in shown.replace("SessionOptions", ""):
                found.append(f"line {node.lineno}: parameter {node.arg}: {shown}")
        elif isinstance(node, ast.ClassDef) and any(
            isinstance(b, ast.Name) and b.id == "Protocol" for b in node.bases
        ):
            declared = protocol_members(node)
            if declared and declared <= members:
                found.append(f"line {node.lineno}: Protocol {node.name} stands for Session")
    return found


def constructor_parameters(tree: ast.Module) -> dict[str, int]:
    """Each class's `__init__` parameters (positional and keyword-only, `self` aside), by
    class name; classes without their own `__init__` are left out."""
    counts: dict[str, int] = {}
    for cls in ast.walk(tree):
        if not isinstance(cls, ast.ClassDef):
            continue
        for node in cls.body:
            if isinstance(node, ast.FunctionDef) and node.name == "__init__":
                a = node.args
                counts[cls.name] = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) - 1
    return counts


def test_session_has_few_pass_throughs() -> None:
    found = pass_throughs()
    assert len(found) <= MAX_PASS_THROUGHS, f"{len(found)} pass-throughs: {', '.join(found)}"


def test_no_helper_takes_the_session() -> None:
    members = session_members()
    found = {
        str(p.relative_to(RUNTIME)): lines
        for p in HELPERS
        if (lines := takes_the_session(p, members))
    }
    assert found == {}


def test_the_count_sees_a_forwarder() -> None:
    """The rule itself, on a few shapes (so a bug in it cannot pass the tests above)."""
    source = '''
class Session:
    def a(self, x):
        """Doc."""
        return self.parent.a(x)
    async def b(self, x):
        return await self.workers.b(x, None)
    @property
    def c(self):
        return self.main.history
    @c.setter
    def c(self, value):
        self.responder.c = value
    def d(self, x):
        return fold(self.parent.d(x))
    def e(self):
        return list(self.registry)
    def f(self, x):
        self.budget.check("no")
        return self.workers.f(x)
'''
    cls = ast.parse(source).body[0]
    assert isinstance(cls, ast.ClassDef)
    shapes = {
        member_name(n): is_pass_through(n)
        for n in cls.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    assert shapes == {
        "a": True,
        "b": True,
        "c": True,
        "c (setter)": True,
        "d": False,
        "e": False,
        "f": False,
    }


def test_parts_take_few_collaborators() -> None:
    found = {
        f"{p.relative_to(RUNTIME)}::{name}": count
        for p in PARTS
        for name, count in constructor_parameters(ast.parse(p.read_text(encoding="utf-8"))).items()
        if count > MAX_PARAMETERS
    }
    assert found == {}, f"more than {MAX_PARAMETERS} constructor parameters: {found}"


def test_the_parameter_count_sees_each_kind() -> None:
    """The count itself, on a few shapes."""
    source = """
class A:
    def __init__(self, a, b=1, /, c=2, *, d, e=3, **rest):
        pass
class B:
    x: int
class C:
    def __init__(self):
        pass
    class D:
        def __init__(self, *args, f):
            pass
"""
    assert constructor_parameters(ast.parse(source)) == {"A": 5, "C": 0, "D": 1}
