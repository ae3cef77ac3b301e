"""The named benchmark cases: scene builders by size, settle times, and the papers' numbers.

A case is one scene at one size. Scenes come from the repository's ``scenes/`` scripts
(``femcontact bench`` runs from a source checkout) except ``cube_drop``, the peers' soft cube,
built here. The papers' numbers are copied from their text: COND (Lee et al.) Table I and
Table II; SAP (Castro et al.) §VI-C states its clutter numbers in words (iterations, e_m) only.
Fig. 11 of COND is a picture without a table: its mat points in Table I (1081 and 4438 DOF)
stand in for it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

from ..errors import FemcontactError
from ..scene_script import load_scene_module

if TYPE_CHECKING:     # the Scene (and its kernels) is imported where a case is built, not to list the cases
    from ..scene import Scene

SCENES_DIR = Path(__file__).resolve().parents[2] / "scenes"


def load_scene(name: str):
    """Import ``scenes/<name>.py`` of the source checkout (a clear error where there is none)."""
    path = SCENES_DIR / f"{name}.py"
    if not path.is_file():
        raise FemcontactError(f"the benchmarks run the scene scripts in {SCENES_DIR}, and {path.name} is not "
                              "there; run femcontact bench from a source checkout (pip install -e .)")
    return load_scene_module(path)


def cube_drop(cells: int, solver: str = "cond") -> Scene:
    """The peers' soft-cube drop: a 0.1 m box of ``cells`` cells per edge (E 1e5, ν 0.4, ρ 1000)
    whose bottom face starts 5 cm above the ground, dt 10 ms, implicit Euler."""
    from .. import meshes
    from ..geometry import shapes
    from ..spec import Material

    from ..scene import Scene

    scene = Scene(dt=1e-2, gravity=(0.0, 0.0, -9.81), solver=solver, integrator="euler", name="cube_drop")
    scene.add_fem_body(meshes.box(size=(0.1, 0.1, 0.1), resolution=cells, center=(0.0, 0.0, 0.1)),
                       material=Material(youngs_modulus=1e5, poisson_ratio=0.4, density=1000.0), name="cube")
    scene.add_obstacle(shapes.HalfSpace(normal=(0.0, 0.0, 1.0)), friction=0.5, name="ground")
    return scene


# scene: (builder(size, solver) -> Scene, the sizes of COND Table I, settle time in s, what a size counts)
PRESETS: dict[str, tuple[Callable[[int, str], Scene], list[int], float, str]] = {
    "mat_drag": (lambda n, s="cond": load_scene("mat_drag").build(resolution=n, solver=s), [12, 26], 0.4,
                 "cells along the mat"),
    "cable_winding": (lambda n, s="cond": load_scene("cable_winding").build(segments=n, solver=s), [160, 320], 1.0,
                      "segments"),
    "gripper_ball": (lambda n, s="cond": load_scene("gripper_ball").build(resolution=n, solver=s), [7, 10], 1.5,
                     "ball resolution"),
    "soft_gripper": (lambda n, s="cond": load_scene("soft_fingers_cylinder").build(resolution=n, solver=s),
                     [9, 20], 1.0, "finger resolution"),
    "cube_drop": (cube_drop, [8, 16], 0.0, "cells per edge"),
    # COND §V-D's symmetric grip: the soft ball (E 1 MPa) squeezed between two pads, and its one-pad
    # control (the ball pressed on one pad with about the same force); settled once the pads hold
    "symmetric_grip": (lambda n, s="cond": load_scene("symmetric_grip").build(sides=2, resolution=n, solver=s),
                       [6], 0.3, "ball resolution"),
    "one_pad": (lambda n, s="cond": load_scene("symmetric_grip").build(sides=1, resolution=n, solver=s),
                [6], 0.3, "ball resolution"),
    "clutter": (lambda n, s="cond": load_scene("clutter").build(solver=s, per_column=n), [10], 0.5,
                "bodies per column"),
}

# COND paper Table I, per scenario and system dimension: max contacts, constraint number, and per
# solver (dynamics ms, solver ms, average iterations; iterations are given for COND only)
PAPER_TABLE1 = {
    ("mat_drag", 0): {"dof": 1081, "constraints": 5355, "contacts": 165,
                      "pgs": (2.890, 41.43, None), "cond": (2.890, 1.058, 15.41)},
    ("mat_drag", 1): {"dof": 4438, "constraints": 24606, "contacts": 724,
                      "pgs": (9.622, 1173.0, None), "cond": (9.622, 3.799, 17.57)},
    ("cable_winding", 0): {"dof": 967, "constraints": 966, "contacts": 130,
                           "pgs": (1.378, 16.66, None), "cond": (1.378, 0.6385, 14.68)},
    ("cable_winding", 1): {"dof": 1927, "constraints": 1926, "contacts": 249,
                           "pgs": (2.145, 74.04, None), "cond": (2.145, 1.216, 18.13)},
    ("gripper_ball", 0): {"dof": 1664, "constraints": 13488, "contacts": 101,
                          "pgs": (7.085, 62.45, None), "cond": (7.180, 2.952, 20.20)},
    ("gripper_ball", 1): {"dof": 4397, "constraints": 41568, "contacts": 263,
                          "pgs": (18.23, 807.2, None), "cond": (18.56, 6.111, 24.84)},
    ("soft_gripper", 0): {"dof": 1712, "constraints": 8910, "contacts": 8,
                          "pgs": (4.801, 6.779, None), "cond": (4.783, 1.973, 24.06)},
    ("soft_gripper", 1): {"dof": 14681, "constraints": 108744, "contacts": 37,
                          "pgs": (45.18, 648.2, None), "cond": (44.47, 16.86, 28.02)},
}
# COND paper Table II: average iterations without and with Chebyshev acceleration
PAPER_TABLE2 = {"mat_drag": (1081, 71.48, 15.41), "cable_winding": (967, 35.68, 14.68),
                "gripper_ball": (1664, 70.53, 20.20), "soft_gripper": (1712, 138.1, 24.06)}
# SAP paper §VI-C (clutter, 40 bodies, walls, dt 10 ms): about 3 Newton iterations per step once
# warm-started at steady state, 21 at step 60 of the transient, e_m below its 1e-5 stop
PAPER_CLUTTER = {"steady_iterations": 3, "transient_iterations_step60": 21, "e_m_below": 1e-5}


@dataclass
class Case:
    """One scene at one size, run by ``measure.measure``."""

    scene: str
    size: int
    settle: float
    paper: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.scene}/{self.size}"

    def build(self, solver: str = "cond") -> Scene:
        return PRESETS[self.scene][0](self.size, solver)


def case(scene: str, size: int, settle: Optional[float] = None) -> Case:
    """The case ``scene`` at ``size`` (settle: the preset's unless given), with its Table I numbers."""
    if scene not in PRESETS:
        raise FemcontactError(f"unknown benchmark scene {scene!r}; choose one of {', '.join(PRESETS)}")
    _, sizes, default_settle, _ = PRESETS[scene]
    paper = PAPER_TABLE1.get((scene, sizes.index(size)), {}) if size in sizes else {}
    return Case(scene, size, default_settle if settle is None else settle, paper)
