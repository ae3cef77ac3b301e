"""Nothing run per step or per query reads a spec (issue 30: the Model is data).

The modules below run after ``Simulator.__init__``; outside their constructors (``__init__``,
``_build*``) no identifier names a spec (``spec``, ``rigid_specs``, ``RigidBodySpec``, ...) and
nothing reads ``.scene``: they read the Model's arrays and the tables their constructors built
(``Model.rigid_com_local_np``, ``Drives.groups``, ``RodSystem.ranges``, ...). Checked by parsing the
source (nothing is imported).
"""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "femcontact"
RUN_TIME_MODULES = ("drives.py", "stepper.py", "queries.py", "io/frames.py", "energy_monitor.py", "bodies/rod.py")
CONSTRUCTORS = ("__init__", "_build")


def _spec_reads(path: Path) -> list:
    """(function, line, identifier) of every spec or scene read outside the constructors of ``path``."""
    found = []

    def visit(node, fn):
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else fn
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                continue
            ident = (child.id if isinstance(child, ast.Name) else child.attr if isinstance(child, ast.Attribute)
                     else child.arg if isinstance(child, ast.arg) else None)
            if (ident and name is not None and not name.startswith(CONSTRUCTORS)
                    and ("spec" in ident.lower() or ident == "scene")):
                found.append((name, child.lineno, ident))
            visit(child, name)

    visit(ast.parse(path.read_text()), None)
    return found


def test_the_checker_sees_a_spec_read(tmp_path):
    path = tmp_path / "probe.py"
    path.write_text("def values(self):\n    return self.model.rigid_specs[0].com_local\n"
                    "def __init__(self, scene):\n    self.x = scene.rigid_bodies\n")
    assert _spec_reads(path) == [("values", 2, "rigid_specs")]


def test_no_spec_read_after_build():
    found = [f"{m}:{line} {fn}: {ident}" for m in RUN_TIME_MODULES for fn, line, ident in _spec_reads(PACKAGE / m)]
    assert not found, "spec reads after build:\n" + "\n".join(found)
