"""Per-frame robot output: ``<out>/<robot>_joints.csv`` next to the run's ``.pvd``.

One row per written frame: ``time`` (s, the frame's time as the ``.pvd`` lists it), then per moving
URDF joint (URDF order, mimic joints too) ``<joint>.position`` (rad or m), ``<joint>.velocity``
(rad/s or m/s; the State's end-of-step rate: under the midpoint integrator a stiff drive's can
alternate in sign from step to step while the position holds, the step's mean rate being the
position difference over dt) and ``<joint>.torque`` (hinge, N m) or ``<joint>.force`` (prismatic, N): the
generalized force its actuator applied over the step that ended at the frame (PD drive plus gravity
compensation, capped together at the URDF effort limit as applied, plus any feedforward effort;
``JointSystem.actuator_forces``; ``nan`` in the row at t = 0, before any step). Then the net
contact force (N, world frame, over the same step) on the robot's end effector, columns
``ee_force_x/y/z`` (the bodies holding ``Robot.end_effector``: the Panda's hand and fingers), or
``links_force_x/y/z`` (every link) for a robot without one.

Each row is appended with one write and fsynced, so a killed run keeps every row it wrote (a torn
last line is dropped when the file is reopened); a resumed run (``Simulator.run(append=True)``)
keeps the rows up to the resume time, as ``SeriesWriter`` keeps its frames, and continues.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from .csvlog import CsvLog
from .vtk import sanitize_name


def csv_header(robot) -> list[str]:
    """The column names of ``robot``'s joints CSV (module docstring)."""
    cols = ["time"]
    for jn, j in robot.all_joints.items():
        cols += [f"{jn}.position", f"{jn}.velocity", f"{jn}.{'force' if j.kind == 'prismatic' else 'torque'}"]
    ee = "ee" if robot.end_effector is not None else "links"
    return cols + [f"{ee}_force_{c}" for c in "xyz"]


def robot_row(sim, robot, forces: dict, contact: dict) -> list[float]:
    """The values of one row for ``robot`` now in ``sim`` (``forces``: ``sim.actuator_forces()``,
    ``contact``: ``sim.rigid_contact_forces()``)."""
    row = [sim.state.time]
    for jn, j in robot.all_joints.items():
        row += [robot.joint_position(sim, jn), robot.joint_velocity(sim, jn), forces.get(j.name, math.nan)]
    total = sum((contact.get(b, np.zeros(3)) for b in robot.end_effector_bodies), np.zeros(3))
    return row + [float(x) for x in total]


class RobotCsvWriter:
    """Appends one row per frame to ``out_dir/<robot>_joints.csv`` for every robot of the scene."""

    def __init__(self, out_dir: str | os.PathLike, robots: list, *, append: bool = False,
                 keep_until: float | None = None):
        self.out_dir = Path(out_dir)
        self.robots = list(robots)
        self.paths = [self.out_dir / f"{sanitize_name(r.name)}_joints.csv" for r in self.robots]
        self.logs = [CsvLog(path, csv_header(robot), append=append, keep_until=keep_until)
                     for robot, path in zip(self.robots, self.paths)]

    def rows(self, sim) -> list[str]:
        """The current frame's line of every robot (read now, in the step loop's thread)."""
        forces = sim.actuator_forces()
        contact = sim.rigid_contact_forces()
        return [",".join(repr(float(x)) for x in robot_row(sim, robot, forces, contact)) + "\n"
                for robot in self.robots]

    def append(self, rows: list[str]) -> None:
        """Append ``rows`` (from ``rows``), one per robot's file (one write and fsync per file)."""
        for log, line in zip(self.logs, rows):
            log.append([line])

    def write(self, sim) -> None:
        """Append the current frame's row of every robot."""
        self.append(self.rows(sim))
