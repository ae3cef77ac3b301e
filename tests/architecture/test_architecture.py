"""The package's import structure, checked by reading the source (nothing is imported).

Every module under ``femcontact/`` is parsed with ``ast``; each ``import``/``from ... import`` of a
femcontact module, at module level or inside a function or class (``if TYPE_CHECKING:`` included), is
an edge of the import graph (``from pkg import name`` goes to ``pkg.name`` when that is a module, else
to ``pkg``). Implicit imports of parent packages are not edges: a package's ``__init__`` re-exporting
its own modules is not a cycle that can bite.

Two levels are checked: modules (no cycle at all) and first-level packages (a top-level module or
subpackage of ``femcontact/``; ``femcontact`` itself is the package root's ``__init__``), whose imports
must follow ``LAYERS``, the one table of allowed package-to-package imports (docs/ARCHITECTURE.md
shows it; ``python tests/architecture/test_architecture.py`` prints it and what the checks find).
"""
import ast
import re
import sys
from pathlib import Path


PACKAGE = Path(__file__).resolve().parents[2] / "femcontact"

# The allowed imports between first-level packages, bottom to top: (layer, package, the packages it may
# import). A package may import only packages listed above it, so the table itself has no cycle, and
# only those its row names; imports inside a package are free, and so are those of LEAF_MODULES.
LAYERS = [
    ("foundation", "errors", ()),
    ("foundation", "backend", ()),
    ("leaf", "math", ("backend",)),
    ("leaf", "layout", ("backend",)),
    ("leaf", "meshes", ()),
    ("leaf", "geometry", ()),
    ("leaf", "geometry_cache", ()),
    ("spec", "spec", ("geometry", "math", "meshes")),
    ("scene", "robots", ("geometry", "geometry_cache", "spec")),
    ("scene", "scene", ("meshes", "robots", "spec")),
    ("scene", "control", ("spec",)),
    ("physics", "dofs", ()),
    ("physics", "bodies", ("backend", "math", "spec")),
    ("physics", "assembly", ("backend", "bodies", "math")),
    ("physics", "contact", ("backend", "geometry", "layout", "math", "meshes")),
    ("model", "model", ("assembly", "backend", "bodies", "contact", "dofs", "scene")),
    ("model", "state", ("backend", "bodies", "contact", "model")),
    ("solvers", "solvers", ("assembly", "backend", "contact", "dofs", "layout", "math", "model", "state")),
    ("simulator", "io", ("math",)),
    ("simulator", "fused", ("assembly", "backend", "contact")),
    ("simulator", "convergence", ("solvers",)),
    ("simulator", "stepper", ("assembly", "backend", "contact", "fused", "solvers")),
    ("simulator", "energy_monitor", ("backend", "stepper")),
    ("simulator", "diff", ("backend", "contact", "math", "solvers", "stepper")),
    ("simulator", "queries", ("assembly", "backend", "bodies", "math")),
    ("simulator", "simulator", ("assembly", "backend", "bodies", "contact", "control", "convergence", "diff",
                                "energy_monitor", "io", "math", "model", "queries", "scene", "solvers", "spec", "state",
                                "stepper")),
    ("application", "kits", ("control", "geometry", "scene")),
    ("application", "scene_script", ()),
    ("application", "sweep", ("backend", "io", "scene", "scene_script", "simulator")),
    ("application", "femcontact", ("sweep",)),
    ("application", "bench", ("backend", "femcontact", "geometry", "io", "meshes", "scene", "scene_script",
                              "simulator", "solvers", "spec")),
    ("application", "cli", ("backend", "bench", "convergence", "femcontact", "io", "meshes", "scene", "scene_script",
                            "simulator", "sweep")),
    ("application", "__main__", ("cli",)),
]
# Modules that import nothing from femcontact but ``errors``: every layer may import them.
LEAF_MODULES = ("femcontact.errors", "femcontact.spec.validation", "femcontact.spec.names")

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


def test_leaf_modules_are_leaves():
    """The modules every layer may import import nothing from femcontact but errors."""
    for leaf in LEAF_MODULES:
        targets = {target for target, _, _ in _imports(leaf)}
        assert targets <= {"femcontact.errors"}, f"{leaf} imports {targets - {'femcontact.errors'}}"
    assert {target for target, _, _ in _imports("femcontact.spec.validation")} == {"femcontact.errors"}


def test_specs_do_not_reach_back_into_the_builder_or_the_runtime_that_reads_them():
    """Nothing in femcontact.spec imports the Scene, the Model, the Simulator or the solvers."""
    for name in MODULES:
        if name.startswith("femcontact.spec"):
            bad = {t for t, _, _ in _imports(name)
                   if t.startswith(("femcontact.scene", "femcontact.model", "femcontact.simulator",
                                    "femcontact.solvers", "femcontact.state"))}
            assert not bad, f"{name} imports {bad}"


# ---------------------------------------------------------------- first-level packages
def _package(module: str) -> str:
    """The first-level package of a dotted module name (``femcontact`` for the root's ``__init__``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _package_imports() -> list:
    """(source package, target package, "file:line imports target") of every import that crosses
    first-level packages, leaf modules left out."""
    out = []
    for name in MODULES:
        path = MODULES[name][0].relative_to(PACKAGE.parent)
        for target, _, line in _imports(name):
            while target not in MODULES and "." in target:
                target = target.rsplit(".", 1)[0]
            src, dst = _package(name), _package(target)
            if src != dst and target not in LEAF_MODULES:
                out.append((src, dst, f"{path}:{line} imports {target}"))
    return out


def _table() -> dict:
    return {package: set(allowed) for _, package, allowed in LAYERS}


def _violations() -> list:
    """The checks' findings as lines (empty: the imports follow the table and no package cycle)."""
    table, found = _table(), []
    order = [package for _, package, _ in LAYERS]
    packages = {_package(m) for m in MODULES}
    found += [f"first-level package {p!r} is not in LAYERS (add its row where it belongs)"
              for p in sorted(packages - set(order))]
    found += [f"LAYERS row {p!r}: no such package" for p in order if p not in packages]
    found += [f"LAYERS lists {p!r} twice" for p in sorted({p for p in order if order.count(p) > 1})]
    for i, (_, package, allowed) in enumerate(LAYERS):
        found += [f"LAYERS row {package!r} allows {a!r}, which is not listed above it" for a in allowed
                  if a not in order[:i]]
    edges = _package_imports()
    found += [f"{where} ({src} -> {dst} is not in LAYERS)" for src, dst, where in edges
              if dst not in table.get(src, set())]
    used = {(src, dst) for src, dst, _ in edges}
    found += [f"LAYERS row {p!r} allows {a!r} but nothing there imports it (drop it)"
              for _, p, allowed in LAYERS for a in allowed if (p, a) not in used]
    graph = {p: set() for p in packages}
    for src, dst in used:
        graph[src].add(dst)
    found += ["package cycle: " + " -> ".join(_one_cycle(graph, c)) for c in _cycles(graph)]
    return found


def format_table() -> str:
    """LAYERS as text, top layer first (docs/ARCHITECTURE.md holds this text)."""
    width = max(len(p) for _, p, _ in LAYERS)
    lines, layer = [], None
    for name, package, allowed in reversed(LAYERS):
        head = f"{name}:" if name != layer else ""
        layer = name
        lines.append(f"{head:<13}{package:<{width}}  -> {', '.join(allowed) if allowed else '-'}".rstrip())
    return "\n".join(lines)


def test_imports_between_packages_follow_the_table():
    """Every import across first-level packages is allowed by LAYERS, every row is used, and the
    package graph has no cycle; a failure names each offending import as file:line."""
    found = _violations()
    assert not found, "import structure:\n" + "\n".join(found)


def test_the_architecture_doc_shows_the_table():
    """docs/ARCHITECTURE.md holds the table as format_table() writes it."""
    doc = (PACKAGE.parent / "docs" / "ARCHITECTURE.md").read_text()
    assert format_table() in doc, \
        "docs/ARCHITECTURE.md: paste the output of `python tests/architecture/test_architecture.py`"


def test_every_name_the_architecture_doc_gives_exists():
    """Each `name` or `a.b` in docs/ARCHITECTURE.md is a word of the source (femcontact/, tests/,
    tools/, scenes/), each `path.py` or `folder/` a file or folder of the repository (or a path the
    source writes), and each module of femcontact/ is named by its file name: the doc stays true."""
    root = PACKAGE.parent
    doc = (root / "docs" / "ARCHITECTURE.md").read_text()
    source = "\n".join(p.read_text() for d in ("femcontact", "tests", "tools", "scenes")
                       for p in sorted((root / d).rglob("*")) if p.suffix in (".py", ".sh"))
    words = set(re.findall(r"[A-Za-z_]\w*", source))
    paths = {str(p.relative_to(root)) for d in ("femcontact", "tests", "tools", "scenes", "docs")
             for p in (root / d).rglob("*")} | {p.name for p in root.iterdir()}
    missing = []
    for token in sorted(set(re.findall(r"`([^`\n]+)`", doc))):
        if re.fullmatch(r"[\w./-]+\.(py|md|sh|toml)|[\w/]+/", token):
            path = token.rstrip("/")
            if not any(p == path or p.endswith("/" + path) for p in paths) and path not in source:
                missing.append(token)
        elif re.fullmatch(r"[A-Za-z_][\w.]*(\(\))?", token):
            if any(part not in words for part in token.rstrip("()").split(".") if part):
                missing.append(token)
    missing += [f"{path.relative_to(root)} (not named)" for name, (path, is_pkg) in MODULES.items()
                if not is_pkg and f"{path.stem}.py" not in doc and f"`{path.stem}`" not in doc]
    assert not missing, f"docs/ARCHITECTURE.md names what does not exist, or leaves out a module: {missing}"


if __name__ == "__main__":
    print(format_table())
    found = _violations()
    print("\n".join(found) if found else
          f"{len(_package_imports())} imports across {len(LAYERS)} first-level packages follow the table; "
          f"no package cycle; no module cycle" if not _cycles(_graph()) else "module cycles found")
    sys.exit(1 if found else 0)

