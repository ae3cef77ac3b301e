"""Prescribed motions and external loads, on the host: the part of a step a body system gets from
outside (docs/THEORY.md §1: pinned or driven blocks are eliminated from ``A v̂ = b``; loads enter ``b``).

The Model builds the prescribed-motion table once (``Model.prescribed``, a ``PrescribedGroup`` per
pin or drive of an FEM body or rod and per kinematic rigid body). ``PrescribedSystem`` gives per step
the groups' v̂ and end-of-step velocity from their current positions (poses), which are part of the
State (``State.prescribed``), and scatters them into ``v_fixed`` / ``v_end``. ``LoadSystem`` turns a
``Control``'s external forces and torques into the step's ``f_ext`` (a device array; gravity is the
integrator's); rigid-body loads go through ``RigidSystem.add_loads``.
(No ``from __future__ import annotations`` here: Taichi reads the kernel's annotations.)
"""
from dataclasses import dataclass
from typing import Callable, NamedTuple, Optional

import numpy as np

from .. import backend
from ..backend import ti
from ..errors import ParameterError
from ..math.quaternion import quat_to_matrix
from ..spec.validation import evaluate_motion


class Pose(NamedTuple):
    """A kinematic rigid body's prescribed pose: shape-frame origin (3,) m and rotation (3, 3)."""

    origin: np.ndarray
    rotation: np.ndarray


@dataclass(frozen=True)
class PrescribedGroup:
    """One row of the prescribed-motion table, built once by the Model: ``index`` (global blocks),
    ``kind`` ("pose": kinematic rigid body ``rigid``'s ``motion`` t -> (origin, rotation); "velocity":
    ``motion`` t -> velocity; "position": ``motion`` (t, x0) -> positions, x0 = ``placed``), ``start``
    (its positions, or ``Pose``, at t = 0) and ``name`` for messages."""

    index: np.ndarray
    kind: str
    motion: Callable
    name: str
    start: object
    rigid: int = -1
    placed: Optional[np.ndarray] = None


@ti.kernel
def scatter_prescribed(index: ti.types.ndarray(), vals: ti.types.ndarray(), ends: ti.types.ndarray(),
                       v_fixed: ti.types.ndarray(), v_end: ti.types.ndarray(), k: ti.i32):
    """v_fixed[index] = vals; v_end[index] = ends (k prescribed nodes)."""
    for i in range(k):
        v_fixed[index[i]] = vals[i]
        v_end[index[i]] = ends[i]


class PrescribedSystem:
    """The prescribed blocks of a Model (``Model.prescribed``): their v̂ and end-of-step velocity per step."""

    def __init__(self, model):
        self.groups: list = model.prescribed
        self.rigid = model.rigid
        self.index = np.concatenate([g.index for g in self.groups]) if self.groups else np.zeros(0, np.int64)
        self.count = len(self.index)
        self._index_arr = backend.int_array(self.index)
        self._vals, self._ends = backend.vec3_array(self.count), backend.vec3_array(self.count)

    def start(self) -> list:
        """The groups' positions (``Pose`` of a kinematic body) at t = 0: ``State.prescribed`` of a new run."""
        return [np.array(g.start) if not isinstance(g.start, Pose)
                else Pose(g.start.origin.copy(), g.start.rotation.copy()) for g in self.groups]

    def values(self, t: float, dt: float, integrator: str, prescribed: list) -> tuple:
        """(k, 3) v̂ and (k, 3) end-of-step velocity of all prescribed nodes for the step from t; advances
        ``prescribed`` (``State.prescribed``: each group's current positions) to t + dt."""
        v_hat, v_end = [], []
        for k, g in enumerate(self.groups):
            x_now, n = prescribed[k], len(g.index)
            if g.kind == "pose":
                x_next = Pose(*evaluate_motion(g.motion, t + dt, f"rigid body {g.name!r}"))
                vh = self.rigid.pose_velocity(g.rigid, x_now, x_next, dt)
                ve = vh
            elif g.kind == "velocity":
                t_hat = t + (0.5 * dt if integrator == "midpoint" else dt)
                vh = np.broadcast_to(np.asarray(g.motion(t_hat), float), (n, 3))
                ve = np.broadcast_to(np.asarray(g.motion(t + dt), float), (n, 3))
                x_next = x_now + dt * vh
            else:
                x_next = np.asarray(g.motion(t + dt, g.placed), float)
                if x_next.shape != (n, 3) or not np.isfinite(x_next).all():
                    raise ParameterError(f"position drive returned shape {x_next.shape} or non-finite values "
                                         f"at t={t + dt:g}; expected ({n}, 3)")
                vh = (x_next - x_now) / dt
                ve = vh
            if not (np.isfinite(vh).all() and np.isfinite(ve).all()):
                raise ParameterError(f"velocity drive returned non-finite values at t={t:g}")
            prescribed[k] = x_next
            v_hat.append(vh)
            v_end.append(ve)
        return np.concatenate(v_hat), np.concatenate(v_end)

    def scatter(self, state, dt: float, integrator: str, v_fixed, v_end) -> None:
        """Write the step's prescribed v̂ and end velocities into ``v_fixed`` / ``v_end`` (one launch)."""
        if not self.count:
            return
        vh, ve = self.values(state.time, dt, integrator, state.prescribed)
        backend.write(self._vals, vh)
        backend.write(self._ends, ve)
        scatter_prescribed(self._index_arr, self._vals, self._ends, v_fixed, v_end, self.count)


class LoadSystem:
    """The external loads of a ``Control`` as the step's nodal force array ``f_ext`` (N; a rigid body's
    angular block holds its torque, N m): a static part plus the time-dependent and rigid-body loads,
    recollected when a script changes the loads (``Control.loads_version``)."""

    def __init__(self, model, control):
        self.model, self.control = model, control
        self._collect()
        self.f_ext = backend.vec3_array(model.n_nodes, self._static)

    def _collect(self) -> None:
        m = self.model
        static = np.zeros((m.n_nodes, 3))
        timed, rigid = [], []
        rigid_index = {name: k for k, name in enumerate(m.rigid.names)}
        for load in self.control.loads.values():
            f = load.force
            if load.body in rigid_index:
                rigid.append((rigid_index[load.body], f))
                continue
            idx = f.nodes + m.body(load.body).node_start
            mass = m.mass_np[idx]
            weights = (mass / mass.sum())[:, None] if f.mode == "total" else np.ones((len(idx), 1))
            if callable(f.force):
                timed.append((idx, weights, f.force))
            else:
                np.add.at(static, idx, weights * f.force)
        self._static, self._timed, self._rigid = static, timed, rigid
        self._version = self.control.loads_version

    def update(self, state, t: float) -> None:
        """``f_ext`` of the step: the loads at time t (rigid-body forces at points turned with the bodies)."""
        if self._version != self.control.loads_version:
            self._collect()
            if not (self._timed or self._rigid):
                backend.write(self.f_ext, self._static)
        if not (self._timed or self._rigid):
            return
        f = self._static.copy()
        for idx, weights, fn in self._timed:
            np.add.at(f, idx, weights * _force_value(fn, t))
        if self._rigid:
            rigid = self.model.rigid
            R = quat_to_matrix(backend.read(state.q, rigid.n_rot).astype(np.float64, copy=False))
            rigid.add_loads(f, R, self._rigid, t, _force_value)
        backend.write(self.f_ext, f)         # host view on the CPU: no copy kernel


def _force_value(fn, t: float) -> np.ndarray:
    if not callable(fn):
        return fn
    value = np.asarray(fn(t), float)
    if value.shape != (3,) or not np.isfinite(value).all():
        raise ParameterError(f"force function returned {value!r} at t={t:g}; expected 3 finite numbers")
    return value
