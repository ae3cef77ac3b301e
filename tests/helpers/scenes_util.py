"""Import the scene scripts of ``scenes/`` (not a package) by file path, once per test session.

Tests that need a scene build it through the scene's own ``build(**kwargs)``, so a test and the
scene a user runs are the same setup; keyword arguments change size, solver or parameters. The
scene procedures several test files share (the thrown sphere) are here too."""
import importlib.metadata
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import femcontact as fc

SCENES = Path(__file__).resolve().parents[2] / "scenes"
_loaded: dict[str, ModuleType] = {}

try:                                   # the Panda's URDF and meshes: the optional extra femcontact[robots]
    importlib.metadata.distribution("example-robot-data")
    HAVE_PANDA = True
except importlib.metadata.PackageNotFoundError:
    HAVE_PANDA = False
needs_panda = pytest.mark.skipif(not HAVE_PANDA, reason="example-robot-data (femcontact[robots]) not installed")


def soft_stack(solver: str, count: int = 3, options: dict | None = None, stiction: str = "anchored",
               name: str = "stack") -> fc.Scene:
    """``count`` soft 0.1 m cubes (E 1e5, ν 0.4, Rayleigh α 1, β 2e-3) stacked on frictional ground (μ 0.6),
    each 4 mm off the one below along x, dt 1e-2, implicit Euler: the soak's stack (tests/physics/test_soak.py)."""
    scene = fc.Scene(dt=1e-2, gravity=(0.0, 0.0, -9.81), solver=solver, integrator="euler", name=name,
                     solver_options=dict(options or {}), stiction=stiction)
    material = fc.Material(youngs_modulus=1e5, poisson_ratio=0.4, density=1000.0, rayleigh_alpha=1.0,
                           rayleigh_beta=2e-3)
    for k in range(count):
        scene.add_fem_body(fc.meshes.box((0.1,) * 3, resolution=2), material,
                           position=(0.004 * k, 0.0, 0.05 + 0.1 * k + 1e-4 * k), name=f"cube{k}")
    scene.add_obstacle(fc.shapes.HalfSpace(normal=(0.0, 0.0, 1.0)), friction=0.6, name="ground")
    return scene


def scene_names() -> list[str]:
    """Every scene script, by file stem (``scenes/*.py``)."""
    return sorted(p.stem for p in SCENES.glob("*.py") if not p.name.startswith("_"))


def load_scene(name: str) -> ModuleType:
    """The module of ``scenes/<name>.py`` (imported once, under the name ``scenes_<name>``)."""
    if name not in _loaded:
        path = SCENES / f"{name}.py"
        spec = importlib.util.spec_from_file_location(f"scenes_{name}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        _loaded[name] = module
    return _loaded[name]


def thrown_sphere(solver: str, v0: float = 2.0, mu: float = 0.3, dt: float = 1e-2) -> fc.Simulator:
    """scenes/sphere_roll.py: a ball settled on the ground (20 steps), then thrown: velocity v0 along x,
    no spin."""
    sim = fc.Simulator(load_scene("sphere_roll").build(solver=solver, v0=0.0, mu=mu, dt=dt))   # at rest first
    sim.run(steps=20)
    sim.set_rigid_velocity("ball", (v0, 0, 0), (0, 0, 0))
    return sim


def rolling_onset(sim: fc.Simulator, radius: float, steps: int) -> tuple[float, float]:
    """Step the thrown ball: the time at which the slip velocity v − ω R reaches zero (linear in the
    slipping phase, extrapolated over the last slipping step), and the final velocity."""
    t, slip = [], []
    t0 = sim.state.time
    for _ in range(steps):
        st = sim.step()
        v, w = sim.rigid_velocity("ball")
        t.append(st.time)
        slip.append(v[0] - w[1] * radius)
    t, slip = np.array(t) - t0, np.array(slip)
    k = np.flatnonzero(slip > 1e-3 * slip[0])[-1]
    rate = (slip[0] - slip[k]) / (t[k] - t[0])
    return t[k] + slip[k] / rate, v[0]
