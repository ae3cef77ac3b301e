"""Nothing run per step or per query reads a spec (issue 30: the Model is data).

The modules below run after ``Simulator.__init__``; outside their constructors (``__init__``,
``_build*``) no identifier names a spec (``spec``, ``rigid_specs``, ``RigidBodySpec``, ...) and
nothing reads ``.scene``: they read the Model's arrays and the tables their constructors built
(``Model.rigid``, ``Model.prescribed``, ``Model.rod_ranges``, ...). Checked by parsing the source
(nothing is imported); and the Model itself keeps no spec and no Scene (``test_the_model_keeps_no_spec``).
"""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "femcontact"
RUN_TIME_MODULES = ("bodies/prescribed.py", "bodies/rigid.py", "stepper.py", "queries.py", "io/frames.py", "energy_monitor.py", "bodies/rod.py")
CONSTRUCTORS = ("__init__", "_build")
SPEC_MODULES = ("femcontact.scene", "femcontact.spec")


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


def test_the_model_keeps_no_spec():
    """Every attribute of a built Model (and every item of a list or dict one holds) is an array, a
    number or a table, never a spec (a ``femcontact.spec`` record) or the Scene; the one exception is
    ``obstacles``, read live by design (a script may move a static obstacle between steps)."""
    import femcontact as fc
    from femcontact.model import Model

    scene = fc.Scene(dt=1e-2)
    cube = scene.add_fem_body(fc.meshes.box((0.1,) * 3, resolution=1, center=(0, 0, 0.05)),
                              fc.Material(1e5, 0.4, 1000.0), name="cube")
    cube.pin("z < 1e-9")
    scene.add_rigid_body(fc.shapes.Sphere(0.05), density=1000.0, position=(0, 0, 1), name="ball")
    scene.add_rigid_body(fc.shapes.Box((0.1, 0.1, 0.1)), density=1000.0, position=(0, 0, 3), name="plate",
                         motion=lambda t: ((0, 0, 3), None))
    scene.add_rod(fc.meshes.rod_straight((0, 0, 2), (1, 0, 2), 4), radius=0.01,
                  material=fc.Material(1e6, 0.4, 1000.0), name="cable").clamp("start")
    scene.add_spring("ball", None, anchor_b=(0, 0, 1.5), stiffness=10.0)
    scene.add_rigid_body(fc.shapes.Sphere(0.05), density=1000.0, position=(0, 0.5, 1), name="arm")
    scene.add_joint("hinge", "ball", "arm", anchor=(0, 0.25, 1), axis=(1, 0, 0), limits=(-1.0, 1.0))
    scene.add_obstacle(fc.shapes.HalfSpace(normal=(0.0, 0.0, 1.0)), name="floor")
    model = Model(scene)

    def specs_in(value):
        items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else [value]
        return [type(v).__name__ for v in items if type(v).__module__.startswith(SPEC_MODULES)]

    assert specs_in(model.obstacles) == ["ObstacleSpec"]          # the checker sees a spec
    found = {name: specs_in(value) for name, value in vars(model).items() if specs_in(value) and name != "obstacles"}
    for part, table in [("rigid", model.rigid), ("joints", model.joints), *(
            (f"joints.joints[{i}]", joint) for i, joint in enumerate(model.joints.joints))]:
        found.update({f"{part}.{name}": specs_in(value) for name, value in vars(table).items() if specs_in(value)})
    assert not found, f"the Model keeps specs: {found}"
