"""numbamr's modules import downward: no import cycle, found by walking every module's import
statements (ast, nothing is imported).

Importing ``a.b.c`` runs ``a.b``'s ``__init__`` first, so an import of a module counts as an
import of each package above it that does not hold the importing module too (``schedule``
importing ``lowering.kernel`` imports ``lowering``, whose ``__init__`` imports the
heuristics: they must not import ``schedule``).
"""
import ast
import functools
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Imports inside a function that point back up, on purpose, each with why. Any other cycle,
# and any cycle of module-level imports, fails.
LATE_UPWARD = {
    ("numbamr.jit", "numbamr.dask"): "a call with dask arrays is handed to numbamr.dask, "
                                     "which builds its stages as jitted functions",
    ("numbamr.dask.program", "numbamr.dask.reductions"): "a combine stage is made by the "
                                                         "reductions built on the programs",
}


@functools.lru_cache(maxsize=None)
def _modules():
    mods = {}
    for folder, _, files in os.walk(os.path.join(ROOT, "numbamr")):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(folder, f), ROOT)[:-3].replace(os.sep, ".")
                is_pkg = f == "__init__.py"
                mods[rel[:-len(".__init__")] if is_pkg else rel] = \
                    (os.path.join(folder, f), is_pkg)
    return mods


def _targets(mod, is_pkg, stmt, mods):
    """The numbamr modules an import statement names (a name that is no module: its
    package), and whether each is a late read of an attribute of a package above ``mod``."""
    if isinstance(stmt, ast.Import):
        return [(a.name, False) for a in stmt.names]
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    if stmt.level:
        base = base[:len(base) - stmt.level + 1]
        target = ".".join(base + ([stmt.module] if stmt.module else []))
    else:
        target = stmt.module
    out = []
    for a in stmt.names:
        full = f"{target}.{a.name}"
        out.append((full, False) if full in mods else (target, mod.startswith(target + ".")))
    return out


@functools.lru_cache(maxsize=None)
def _parsed(path):
    """The module's syntax tree and the ids of the nodes inside its functions."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    return tree, _function_level(tree)


def _function_level(tree):
    inner = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inner |= {id(n) for n in ast.walk(node) if n is not node}
    return inner


def import_graph(module_level_only=False, late_upward=LATE_UPWARD):
    """module -> the numbamr modules its imports run (packages above them included), but
    for the function-level imports ``late_upward`` lists."""
    mods, graph = _modules(), {}
    for mod, (path, is_pkg) in mods.items():
        tree, late = _parsed(path)
        deps = set()
        for stmt in ast.walk(tree):
            if not isinstance(stmt, (ast.Import, ast.ImportFrom)):
                continue
            if module_level_only and id(stmt) in late:
                continue
            for target, package_attribute in _targets(mod, is_pkg, stmt, mods):
                if package_attribute and id(stmt) in late:
                    continue        # a package's attribute read when the function runs
                if (mod, target) in late_upward and id(stmt) in late:
                    continue
                while target not in mods and "." in target:
                    target = target.rsplit(".", 1)[0]
                parts = target.split(".")
                for i in range(1, len(parts) + 1):
                    t = ".".join(parts[:i])
                    if t in mods and t != mod and not mod.startswith(t + "."):
                        deps.add(t)
        graph[mod] = deps
    return graph


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_module_level_imports_have_no_cycle():
    assert not cycles(import_graph(module_level_only=True))


def test_no_import_cycle_but_the_late_ones_listed():
    assert not cycles(import_graph())


def test_the_walk_sees_the_imports_it_must():
    """The graph holds known imports (so an empty graph cannot pass), and an upward import
    of the scheduler from the lowering would be a cycle."""
    graph = import_graph()
    assert "numbamr.lowering" in graph["numbamr.schedule"]
    assert "numbamr.lowering.kernel" in graph["numbamr.schedule"]
    assert "numbamr.lowering.heuristics" in graph["numbamr.lowering"]
    assert "numbamr.tracer" in graph["numbamr.composite"]
    graph["numbamr.lowering.heuristics"].add("numbamr.schedule")
    assert any("numbamr.schedule" in c and "numbamr.lowering" in c for c in cycles(graph))


def test_the_late_upward_imports_exist():
    """Each listed late import is still made: an entry for one that is gone would hide
    nothing and mislead."""
    graph = import_graph(late_upward={})
    missing = [edge for edge in LATE_UPWARD if edge[1] not in graph[edge[0]]]
    assert not missing, missing
