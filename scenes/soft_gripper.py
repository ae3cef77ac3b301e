"""COND §V-D, Fig. 10: a soft gripper grasps a rigid object mounted on a force/torque sensor.

The gripper is a soft Ecoflex 0050 pad (the paper's parameters: E 83 kPa, ν 0.42, μ 2.1 against
the PLA object) carried by a linear actuator: its back face is driven. The object is a rigid block
held still (its mount is the F/T sensor), so it is a static obstacle here, and the force the pad
puts on it is what the sensor reads. The pad (40 mm long along the actuator, 20 x 20 mm section)
approaches from 0.5 mm away, presses 4 mm in (``T_PRESS``), holds, then the actuator moves 8 mm
along the object's face (``T_DRAG``) and holds again.

What to expect (tests/scenes/test_soft_gripper.py):
- pressed, the normal force is that of a compressed bar, ``E A δ / L`` = 3.32 N for the 4 mm
  (10% strain), a few percent above it because the driven back face and the sticking front face
  cannot widen;
- dragged at μ 2.1 the pad sticks (the face does not slide; the pad shears), its tangential force
  below μ times the normal one; with a low friction coefficient (``build(friction=0.3)``) the pad
  slides and the sensor reads F_t = μ F_n (Coulomb);
- COND (the paper's solver, default) and the Newton path agree on the force trace.

The force trace (time, F_x, F_y, F_z on the object, N) is ``contact_force.csv`` in the output folder
when the script runs directly (``python scenes/soft_gripper.py``), like the paper's sensor trace; a
``femcontact run`` writes the contacts with their impulses into the VTK series.
Run: femcontact run scenes/soft_gripper.py --out out/soft_gripper
"""
from pathlib import Path

import numpy as np

import femcontact as fc

ECOFLEX_0050 = dict(youngs_modulus=83e3, poisson_ratio=0.42, density=1070.0)   # paper; density: datasheet
FRICTION = 2.1                 # pad on PLA (paper: identified by a stick-slip test)
PAD = (0.04, 0.02, 0.02)       # m: length along the actuator (x), then its section
GAP = 5e-4                     # m: the pad's front face from the object at the start
PRESS = 4e-3                   # m: how far the actuator pushes the pad in once it touches
DRAG = 8e-3                    # m: the actuator's travel along the object's face (z) while pressing
T_PRESS, T_HOLD, T_DRAG, T_END = 1.0, 1.5, 2.5, 3.0   # s: pressed by, drag starts, drag ends, end


def _smooth(u: float) -> float:
    u = min(max(u, 0.0), 1.0)
    return u * u * (3.0 - 2.0 * u)


def actuator(t: float) -> np.ndarray:
    """The actuator's displacement from its start (m): toward the object (+x), then along it (+z)."""
    return np.array([(GAP + PRESS) * _smooth(t / T_PRESS), 0.0, DRAG * _smooth((t - T_HOLD) / (T_DRAG - T_HOLD))])


def bar_force() -> float:
    """Normal force of the pressed pad as a bar in uniaxial compression, E A δ / L (N)."""
    return ECOFLEX_0050["youngs_modulus"] * PAD[1] * PAD[2] * PRESS / PAD[0]


def build(solver: str = "cond", friction: float = FRICTION, resolution: int = 8, dt: float = 1e-2) -> fc.Scene:
    scene = fc.Scene(dt=dt, solver=solver, integrator="midpoint" if solver == "cond" else "euler",
                     duration=T_END, frame_dt=0.05, name="soft_gripper")
    # the object's face is the plane x = 0; the object reaches 30 mm behind it and well beyond the pad
    scene.add_obstacle(fc.shapes.Box((0.015, 0.03, 0.04)), position=(0.015, 0.0, 0.0), friction=friction,
                       stiffness=1e6, name="object")
    pad = scene.add_fem_body(fc.meshes.box(PAD, resolution, center=(-GAP - PAD[0] / 2, 0.0, 0.0)),
                             fc.Material(**ECOFLEX_0050, rayleigh_beta=0.01), name="pad")
    back = -GAP - PAD[0] + 1e-6
    pad.drive(f"x < {back}", position=lambda t, x0: x0 + actuator(t))
    return scene


def object_force(sim: fc.Simulator) -> np.ndarray:
    """Force (N, world) the pad puts on the object over the last step: what the F/T sensor reads."""
    d = sim.contacts.to_numpy()
    return np.zeros(3) - (d["impulse_world"].sum(0) / sim.scene.dt if sim.contacts.count else 0.0)


def run_with_trace(sim: fc.Simulator, out: Path) -> np.ndarray:
    """Run the scene, writing its frames to ``out`` and the sensor trace to ``out/contact_force.csv``;
    returns the trace (time, F_x, F_y, F_z) per step."""
    rows = []
    sim.run(out=out, progress=True, callback=lambda s: rows.append([s.state.time, *object_force(s)]))
    trace = np.array(rows)
    np.savetxt(out / "contact_force.csv", trace, fmt="%.9g", delimiter=",", header="time,force_x,force_y,force_z",
               comments="")
    return trace


if __name__ == "__main__":
    out = Path("out/soft_gripper")
    trace = run_with_trace(fc.Simulator(build()), out)
    print(f"{out / 'contact_force.csv'}: {len(trace)} rows; pressed: {trace[trace[:, 0] <= T_HOLD][-1, 1]:.3f} N "
          f"(bar {bar_force():.3f} N)")
