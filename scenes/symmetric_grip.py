"""A soft ball squeezed symmetrically between two kinematic pads (COND §V-D, the symmetric grip), or
pushed by one pad only (``sides=1``, the one-sided control).

COND §V-D: "the Delassus operator is ill-conditioned as the object is captured symmetrically on both
sides, and thus the convergence of the [NCP-PGS] solver is degraded". Here the two pads close on
the ball from ±x and hold it; equal and opposite pad impulses move the ball's centre not at all and
only squeeze it, so in the Delassus operator G = J A⁻¹ Jᵀ that squeeze direction is stiff-body
small against the rigid-translation directions: Gauss–Seidel passes a correction from one pad to
the other one sweep at a time. With one pad (``sides=1``) the ball is pushed along with nothing
opposing: the same contact patch, no squeeze mode.

No ground and no gravity: the grip alone. The pads are
obstacles (prescribed boxes), so no joint or virtual node enters either solver.
``femcontact bench --table pgs_convergence`` measures both solvers here (docs/BENCHMARKS.md).
Run: femcontact run scenes/symmetric_grip.py --out out/symmetric_grip
"""
import numpy as np

import femcontact as fc

RADIUS = 0.04
HALF_THICKNESS = 0.005
GAP = 0.002          # each pad's inner face starts this far off the ball
SQUEEZE = 0.004      # and moves in this far beyond touching
CLOSE_T = 0.2        # s: the two pads close over this time, then hold
LOAD = 330.0         # m/s²: with one pad (sides=1) a body force along +x presses the ball on the pad
#                      with about the two pads' grip force (87 N per pad on the 0.26 kg ball at resolution 6)


def pad_motion(side: float, sides: int):
    """Pose of the pad on ``side`` (±1). Two pads: each closes GAP + SQUEEZE over CLOSE_T, then holds.
    One pad: it stays put, GAP off the ball, and the body force LOAD along +x lays the ball on it."""
    speed = (GAP + SQUEEZE) / CLOSE_T

    def motion(t: float):
        travel = speed * min(t, CLOSE_T) if sides == 2 else 0.0
        return np.array([side * (RADIUS + GAP - travel + HALF_THICKNESS), 0.0, 0.0]), None
    return motion


def build(sides: int = 2, resolution: int = 4, youngs_modulus: float = 1e6, friction: float = 0.5,
          solver: str = "cond", duration: float = 0.5) -> fc.Scene:
    if sides not in (1, 2):
        raise ValueError(f"sides must be 1 (one pad) or 2 (the symmetric grip), got {sides}")
    integrator = "midpoint" if solver == "cond" else "euler"
    scene = fc.Scene(dt=1e-2, gravity=(LOAD if sides == 1 else 0.0, 0.0, 0.0), solver=solver,
                     integrator=integrator, duration=duration, frame_dt=0.02, name="symmetric_grip")
    scene.add_fem_body(fc.meshes.sphere(radius=RADIUS, resolution=resolution),
                       fc.Material(youngs_modulus=youngs_modulus, poisson_ratio=0.4, density=1000.0,
                                   rayleigh_beta=0.01),
                       position=(0.0, 0.0, 0.0), name="ball")
    for side, name in ((1.0, "right_pad"), (-1.0, "left_pad"))[:sides]:
        scene.add_obstacle(fc.shapes.Box(half_extents=(HALF_THICKNESS, 0.05, 0.05)),
                           motion=pad_motion(side, sides), friction=friction, name=name)
    return scene


if __name__ == "__main__":
    sim = fc.Simulator(build())
    print(sim.run(progress=True, out="out/symmetric_grip"))
