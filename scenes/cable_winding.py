"""Cable winding (COND §V-C): a cable lying on the ground is wound onto a fixed drum by a driven
tool holding its end, which circles the drum axis and advances along it by 2.5 cable radii per
turn. Cable material as in the paper: E = 2.954 MPa, nu = 0.49, friction mu = 1.3 (drum and
ground). ``build(segments)``: 160 segments give 963 DOF (the paper's 967-DOF case), 320 give
1923 (its 1927). Contacts: cable against drum and ground, and the cable's turns against each
other (self-contact)."""
import numpy as np

import femcontact as fc

R_DRUM, R_CABLE, OMEGA = 0.03, 0.004, 2 * np.pi * 0.5       # drum radius m, cable radius m, rad/s


def build(segments: int = 160, solver: str = "lagged", integrator: str = "euler") -> fc.Scene:
    scene = fc.Scene(dt=1e-2, integrator=integrator, solver=solver, duration=4.0, name="cable_winding")
    length = 1.2
    c = np.array([0.0, 0.0, R_DRUM + 0.01])                 # drum axis along x through c
    rp = R_DRUM + R_CABLE
    start = c + np.array([0.0, rp, 0.0])
    pts = fc.meshes.rod_straight(start, start + np.array([0.0, length, 0.0]), segments)
    pts[:, 2] = np.maximum(pts[:, 2] - np.linspace(0, 1, segments + 1) * (pts[0, 2] - R_CABLE), R_CABLE)
    cable = scene.add_rod(pts, R_CABLE, material=fc.Material(2.954e6, 0.49, 1200.0, rayleigh_alpha=1.0),
                          rest_shape="straight", name="cable")
    scene.add_obstacle(fc.shapes.Cylinder(radius=R_DRUM, half_length=0.15), position=c,
                       rotation=np.array([[0, 0, 1.0], [0, 1.0, 0], [-1.0, 0, 0]]), friction=1.3, name="drum")
    scene.add_obstacle(fc.shapes.HalfSpace(normal=(0, 0, 1)), friction=1.3, name="ground")
    pitch = 2.5 * R_CABLE

    def tool(t, x0):
        a = OMEGA * t
        return (c + np.array([pitch * a / (2 * np.pi), rp * np.cos(a), rp * np.sin(a)]))[None]

    cable.drive([0], position=tool)
    return scene


if __name__ == "__main__":
    sim = fc.Simulator(build())
    print(sim.run(out="out/cable_winding", progress=True))
