"""The package's import structure, checked by reading the source (nothing is imported).

Every module under ``femcontact/`` is parsed with ``ast``; each ``import``/``from ... import`` of a
femcontact module, at module level or inside a function or class, is an edge of the import
graph (``from pkg import name`` goes to ``pkg.name`` when that is a module, else to ``pkg``).
Implicit imports of parent packages are not edges: a package's ``__init__`` re-exporting its
own modules is not a cycle that can bite.
"""
import ast
from pathlib import Path


PACKAGE = Path(__file__).resolve().parents[1] / "femcontact"

# Known debts owned by other work, listed so that they cannot grow and so that fixing them makes
# this test fail until the entry is removed (none today).
PENDING_CYCLES: list = []
PENDING_PRIVATE: set = set()


def _modules() -> dict:
    """Dotted name -> (path, is_package) of every module under femcontact/."""
    mods = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        mods[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return mods


MODULES = _modules()


def _imports(name: str) -> list:
    """(target module, imported name or None, line) of every femcontact import in module ``name``."""
    path, is_pkg = MODULES[name]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, None, node.lineno) for a in node.names if a.name.split(".")[0] == "femcontact"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "femcontact":
                continue
            for a in node.names:
                sub = f"{target}.{a.name}"
                out.append((sub, None, node.lineno) if sub in MODULES else (target, a.name, node.lineno))
    return out


def _graph() -> dict:
    graph = {}
    for name in MODULES:
        edges = graph.setdefault(name, set())
        for target, _, _ in _imports(name):
            while target not in MODULES and "." in target:      # `import femcontact.x.y` of a name
                target = target.rsplit(".", 1)[0]
            if target != name:
                edges.add(target)
    return graph


def _cycles(graph: dict) -> list:
    """Strongly connected components with more than one module (Tarjan), each as a set."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(comp)

    for v in graph:
        if v not in index:
            visit(v)
    return found


def _one_cycle(graph: dict, comp: set) -> list:
    """A closed path through a strongly connected component, for the failure message."""
    start = min(comp)
    path, seen = [start], {start}
    while True:
        nxt = min(w for w in graph[path[-1]] if w in comp)
        if nxt in seen:
            return path[path.index(nxt):] + [nxt]
        path.append(nxt)
        seen.add(nxt)


def test_the_parser_sees_every_kind_of_import():
    """The graph holds module-level, function-level, relative and absolute imports."""
    graph = _graph()
    assert "femcontact.spec.validation" in graph["femcontact.scene"]           # module level, relative
    assert "femcontact.io.run_output" in graph["femcontact.simulator"]          # in a method
    assert "femcontact.solvers.newton_linear" in graph["femcontact.solvers.linear"]      # in a function
    assert "femcontact.backend" in graph["femcontact.bodies.joints"]          # `from .. import backend`


def test_no_import_cycles():
    graph = _graph()
    cycles = [c for c in _cycles(graph) if c not in PENDING_CYCLES]
    assert not cycles, "import cycles inside femcontact/:\n" + "\n".join(
        " -> ".join(_one_cycle(graph, c)) for c in cycles)


def test_pending_cycles_are_still_real():
    """Drop an entry of PENDING_CYCLES once its cycle is gone."""
    cycles = _cycles(_graph())
    assert [c for c in PENDING_CYCLES if c not in cycles] == []


def test_no_private_names_imported_across_modules():
    found = {(name, target, what) for name in MODULES for target, what, _ in _imports(name)
             if what is not None and what.startswith("_") and not what.startswith("__")}
    assert not found - PENDING_PRIVATE, f"private names imported across modules: {sorted(found - PENDING_PRIVATE)}"
    assert PENDING_PRIVATE <= found, f"no longer imported, drop from PENDING_PRIVATE: {sorted(PENDING_PRIVATE - found)}"


def test_validation_module_is_a_leaf():
    """spec.validation may import nothing from femcontact but errors (every layer imports it)."""
    targets = {target for target, _, _ in _imports("femcontact.spec.validation")}
    assert targets == {"femcontact.errors"}, targets


def test_specs_do_not_reach_back_into_the_builder_or_the_runtime_that_reads_them():
    """Nothing in femcontact.spec imports the Scene, the Model, the Simulator or the solvers."""
    for name in MODULES:
        if name.startswith("femcontact.spec"):
            bad = {t for t, _, _ in _imports(name)
                   if t.startswith(("femcontact.scene", "femcontact.model", "femcontact.simulator",
                                    "femcontact.solvers", "femcontact.state"))}
            assert not bad, f"{name} imports {bad}"
