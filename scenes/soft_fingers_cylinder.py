"""Two soft FEM fingers grasp a rigid cylinder and lift it (the soft-gripper scene of COND §V-D).

Each finger is a soft block whose top face is driven: the fingers close by 6 mm each on the
cylinder lying on the ground (axis along y), then rise 5 cm.
Run: femcontact run scenes/soft_fingers_cylinder.py --out out/soft_fingers_cylinder
"""
import numpy as np

import femcontact as fc

R_CYL = 0.03
SQUEEZE = 0.006
T_CLOSE, T_LIFT, LIFT = 0.4, 1.2, 0.05


def top_motion(sign: float):
    """Position drive of a finger's top face: inward by SQUEEZE, then up by LIFT (smooth)."""
    def pos(t, x0):
        u = np.clip(t / T_CLOSE, 0, 1)
        w = np.clip((t - T_CLOSE) / (T_LIFT - T_CLOSE), 0, 1)
        shift = np.array([-sign * SQUEEZE * (3 * u * u - 2 * u**3), 0.0, LIFT * (3 * w * w - 2 * w**3)])
        return x0 + shift
    return pos


def build(solver: str = "lagged", resolution: int = 3, friction: float = 1.0, duration: float = 2.0) -> fc.Scene:
    scene = fc.Scene(dt=1e-2, solver=solver, integrator="midpoint" if solver == "cond" else "euler",
                     duration=duration, friction=friction, frame_dt=0.02, name="soft_fingers_cylinder")
    # stiff ground, like the pads below: the automatic near-rigid stiffness of a contact at a rim end
    # includes the cylinder's tilt compliance, so it would rest ~0.3 mm deep on its two rim points
    scene.add_obstacle(fc.shapes.HalfSpace(), friction=0.3, stiffness=1e6, name="ground")
    axis_y = np.array([[1.0, 0, 0], [0, 0, -1.0], [0, 1.0, 0]])
    scene.add_rigid_body(fc.shapes.Cylinder(R_CYL, 0.03), density=500.0, position=(0, 0, R_CYL), rotation=axis_y,
                         name="cylinder")
    soft = fc.Material(youngs_modulus=2e5, poisson_ratio=0.4, density=1100.0, rayleigh_beta=0.01)
    size = (0.02, 0.04, 0.06)
    for name, sign in (("left", -1.0), ("right", 1.0)):
        center = (sign * (R_CYL + size[0] / 2 + 0.001), 0.0, R_CYL + 0.005)
        finger = scene.add_fem_body(fc.meshes.box(size=size, resolution=resolution, center=center), soft, name=name)
        top = center[2] + size[2] / 2 - 1e-6
        finger.drive(f"z > {top}", position=top_motion(sign))
        scene.set_contact(name, "ground", enabled=False)
        scene.set_contact(name, "cylinder", stiffness=1e6)   # stiff pads: penetration < 1% of an edge
    return scene


if __name__ == "__main__":
    sim = fc.Simulator(build())
    print(sim.run(progress=True, out="out/soft_fingers_cylinder"))
