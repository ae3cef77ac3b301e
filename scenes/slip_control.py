"""SAP paper §VI-D, slip control (Figs. 16-17): a parallel gripper anchored to the world holds a
spatula horizontally by its handle; the grasp force is a square wave between 16 N and 1 N (6 s
period, 75% duty: 4.5 s firm, 1.5 s loose). With the firm grip the spatula is held in stiction;
with the loose one the pads' friction torque about their normal cannot hold the weight's torque
and the spatula pitches down within the grasp until the grip is firmed again. Its pitch angle
rises in steps (Fig. 17, right): a staircase of slip (loose) and stick (firm).

Paper parameters: grip 16 N / 1 N, period 6 s, duty 75%, dt 5 ms, SAP, implicit Euler, μ 1.0
(the spatula model of the paper's example, Drake's ``spatula_slip_control``: mass 68 g, μ 1.0).
That model's rotational inertia is large for its mass: principal moments 0.216, 0.211 and
0.0098 kg m² about its centre of mass (a radius of gyration of 1.8 m). This inertia is what makes
the slip rate-limited: in each 1.5 s loose phase the spatula turns only part of the way to where
the friction torque would stop it, so it steps. ``inertia="paper"`` (default) uses these moments
(the spatula's pitch axis is the gripper's closing axis x, its long axis is y);
``inertia="shape"`` gives the spatula the inertia of its solid shape at 68 g (I = 1.9e-3 kg m²
about the pitch axis), and then it swings down in a fraction of a second in the first loose phase
and sticks where the friction torque holds it: one step, not a staircase.

Our gripper has rigid pads with compliant contact (the paper's are air-filled Soft-bubble pads);
each finger is pressed by a force on its slide (force control, a light damper), so the grip force
is the commanded one. The pads' friction torque about their normal scales with the grip force F
(2 μ F times the lever of the pad's contact points about the grip point); the weight's torque about
the grip point is m g d cos θ (d: the centre of mass's distance from the grip point along the
handle, θ the pitch). Here d = 9 cm, the pads press 4 cm of the handle: holding threshold
``holding_force()`` = 3.0 N, between the paper's 1 N and 16 N. Expected (tests/scenes/test_slip_control.py,
measured, SAP σ = 1e-3, dt 5 ms, 24 s): while gripped at 16 N the pitch creeps only at SAP's
regularized-stiction rate (2-4.4e-3 rad/s, i.e. ~1° per firm phase); the loose phases pitch it by
13.5°, 12.3°, 7.9°, 6.0° (``predicted_step``, Coulomb: 12.8°, 11.8°, 9.8°, 8.1°), a staircase
to 47° at 24 s, turning about the grip point (no slide along the handle, no drop). With
``inertia="shape"`` the first loose phase swings it down 82° and the second adds 0.2°.
Run: femcontact run scenes/slip_control.py --out out/slip_control
"""
import numpy as np

import femcontact as fc
from femcontact.kits import ParallelGripper

GRIP_HIGH, GRIP_LOW = 16.0, 1.0          # N, per pad (paper)
PERIOD, DUTY = 6.0, 0.75                 # s, fraction of the period at GRIP_HIGH (paper)
MASS = 0.068                             # kg (the paper's spatula model)
PAPER_INERTIA = (0.211, 0.216, 0.0098)   # kg m² about the centre of mass: pitch (local x), yaw, long axis (z)
HANDLE_RADIUS = 0.01                     # m: the handle is a capsule along the spatula's axis
COM_DISTANCE = 0.09                      # m: centre of mass (the handle's centre) from the grip point
HANDLE_HALF = 0.115                      # m: half the handle's length, tip to tip (grip 2.5 cm from its end)
PAD = (0.01, 0.02, 0.03)                 # finger half extents (m): across the gap, along the handle, height
GRIP = np.array([0.0, 0.0, 0.3])         # the grip point (world, m)


def grip_force(t: float, high: float = GRIP_HIGH, low: float = GRIP_LOW, period: float = PERIOD,
               duty: float = DUTY) -> float:
    """Grasp force per pad (N): the square wave of Fig. 17 (left), firm first."""
    return high if (t % period) < duty * period else low


def spatula_shape() -> fc.shapes.Capsule:
    """The spatula's handle (axis local z); the blade touches nothing and is folded into the mass
    properties."""
    return fc.shapes.Capsule(HANDLE_RADIUS, HANDLE_HALF - HANDLE_RADIUS)


# The spatula's frame: local z (its axis) along world y, local x (the pitch axis) along world x.
SPATULA_ROTATION = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]])


def weight_torque(mass: float = MASS) -> float:
    """Torque of the spatula's weight about the grip point when horizontal (N m)."""
    return mass * 9.81 * COM_DISTANCE


def friction_torque(force: float, friction: float = 1.0, mass: float = MASS) -> float:
    """Largest friction torque (N m) the two pads give about the grip point at grip force ``force``
    (N per pad) while also carrying the weight: each pad presses uniformly along its length 2h on
    the handle (pressure p = F / 2h); friction +μp on one side of a point y0, −μp on the other,
    with y0 set by the vertical balance (−2 μ p y0 per pad = m g / 2). Per pad μ p (h² − y0²)."""
    h = PAD[1]
    p = force / (2 * h)
    y0 = mass * 9.81 / (4 * friction * p)
    if y0 >= h:
        return 0.0            # the friction cannot even carry the weight
    return 2 * friction * p * (h * h - y0 * y0)


def holding_force(friction: float = 1.0, mass: float = MASS) -> float:
    """Grip force per pad (N) at which the pads' friction torque equals the weight's torque when
    horizontal (bisection on ``friction_torque``): held above it, pitches below it."""
    lo, hi = 0.0, 1e3
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if friction_torque(mid, friction, mass) < weight_torque(mass) else (lo, mid)
    return 0.5 * (lo + hi)


def grip_inertia(inertia: str = "paper", mass: float = MASS) -> float:
    """The spatula's moment of inertia (kg m²) about the pitch axis through the grip point."""
    if inertia == "paper":
        I = PAPER_INERTIA[0]
    else:
        from femcontact.geometry.mass import mass_properties
        m1, _, I1 = mass_properties(spatula_shape(), 1.0)
        I = float(np.asarray(I1)[0, 0]) * mass / m1
    return I + mass * COM_DISTANCE**2


def predicted_step(theta0: float, force: float = GRIP_LOW, duration: float = (1 - DUTY) * PERIOD,
                   friction: float = 1.0, inertia: str = "paper", mass: float = MASS) -> float:
    """Pitch gained (rad) in a loose phase of ``duration`` s at grip ``force``, from rest at pitch
    theta0: I θ'' = m g d cos θ − friction_torque(force) while that is positive (Coulomb friction
    on the cone, the regrip stopping it at the phase's end)."""
    I, tau_f = grip_inertia(inertia, mass), friction_torque(force, friction, mass)
    theta, omega, h = theta0, 0.0, 1e-4
    for _ in range(int(round(duration / h))):
        acc = (weight_torque(mass) * np.cos(theta) - tau_f) / I
        if omega <= 0.0 and acc <= 0.0:
            break
        omega += h * acc
        theta += h * omega
    return theta - theta0


def build(solver: str = "sap", friction: float = 1.0, duration: float = 24.0, dt: float = 5e-3,
          grip_high: float = GRIP_HIGH, grip_low: float = GRIP_LOW, period: float = PERIOD, duty: float = DUTY,
          inertia: str = "paper", mass: float = MASS, pad_stiffness: float = 2e3, sigma=None) -> fc.Scene:
    """inertia: "paper" (the paper's spatula moments) or "shape" (the solid shape's, at ``mass``);
    pad_stiffness: contact stiffness of pad-handle contacts (N/m per contact point, compliant pads);
    sigma: SAP's friction regularization (eq. 30) of the pad-handle contacts (default: the scene's)."""
    if inertia not in ("paper", "shape"):
        raise fc.ParameterError(f"inertia must be 'paper' or 'shape', got {inertia!r}")
    scene = fc.Scene(dt=dt, solver=solver, integrator="euler", duration=duration, frame_dt=0.05,
                     friction=friction, name="slip_control")
    scene.add_rigid_body(spatula_shape(), mass=mass, inertia=PAPER_INERTIA if inertia == "paper" else None,
                         position=tuple(GRIP + [0.0, COM_DISTANCE, 0.0]), rotation=SPATULA_ROTATION, name="spatula")
    gripper = ParallelGripper(scene, position=GRIP, opening=2 * HANDLE_RADIUS + 2e-4, finger_half_extents=PAD)
    schedule = dict(high=grip_high, low=grip_low, period=period, duty=duty)
    for joint, finger, sign in zip(gripper.joints, gripper.fingers, (1.0, -1.0)):
        joint.set_drive(kp=0.0, kd=5.0, target=None)       # force control: only a light damper on the slide
        finger.add_force(lambda t, s=sign: np.array([s * grip_force(t, **schedule), 0.0, 0.0]))
    for finger in gripper.fingers:      # compliant pads (the paper's air-filled bubbles), N/m per contact point
        scene.set_contact(finger.name, "spatula", stiffness=pad_stiffness, sigma=sigma)
    scene.gripper = gripper
    return scene


def pitch(sim) -> float:
    """The spatula's pitch (rad, positive = blade down): the angle of its axis below the horizontal."""
    _, R = sim.rigid_pose("spatula")
    return float(np.arcsin(np.clip(-R[2, 2], -1.0, 1.0)))


def metrics(sim) -> dict:
    com, _ = sim.rigid_pose("spatula")
    return {"pitch_deg": float(np.degrees(pitch(sim))), "com_z": float(com[2])}


if __name__ == "__main__":
    sim = fc.Simulator(build())
    print(sim.run(progress=True, out="out/slip_control"))
