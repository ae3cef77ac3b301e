"""Prescribed motions and external loads of a step, on the host: what the step's assembly scatters.

``Drives``: the pinned or driven nodes of FEM bodies and rods and the kinematic rigid bodies; per
step their v̂ and end-of-step velocity, from the groups' current positions (poses), which are part
of the State (``State.prescribed``). ``Loads``: the external forces and torques of a ``Control``
as the step's ``f_ext`` (a device array; gravity is the integrator's).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from . import backend
from .assembly import integrator as integ
from .errors import ParameterError
from .math.quaternion import cayley_velocity, quat_to_matrix
from .spec.validation import evaluate_motion
from .state import Pose


@dataclass(frozen=True)
class PrescribedGroup:
    """One row of the prescribed-motion table, built once from the specs: ``index`` (global blocks),
    ``kind`` ("pose": a kinematic rigid body's ``motion`` t -> (origin, rotation), its centre of mass at
    ``com_local``; "velocity": ``motion`` t -> velocity; "position": ``motion`` (t, x0) -> positions,
    x0 = ``placed``) and ``name`` for messages."""

    index: np.ndarray
    kind: str
    motion: Callable
    name: str
    com_local: Optional[np.ndarray] = None
    placed: Optional[np.ndarray] = None


class Drives:
    """Which nodes are prescribed, and their v̂ and end-of-step velocity per step."""

    def __init__(self, scene, model):
        self.groups: list[PrescribedGroup] = []
        self._start = []    # each group's positions (pose) at t = 0
        for spec in [*scene.fem_bodies, *scene.rods]:   # rods: same drive records
            start = model.body(spec.name).node_start
            for d in spec.drives:
                kind, motion = ("velocity", d.velocity) if d.velocity is not None else ("position", d.position)
                self.groups.append(PrescribedGroup(d.nodes + start, kind, motion, spec.name,
                                                   placed=spec.positions[d.nodes].copy()))
                self._start.append(spec.positions[d.nodes].copy())
        for spec in scene.rigid_bodies:
            if spec.kinematic:
                self.groups.append(PrescribedGroup(np.arange(2) + model.body(spec.name).node_start, "pose",
                                                   spec.motion, spec.name, com_local=spec.com_local.copy()))
                self._start.append(Pose(*spec.pose(0.0)))
        self.index = np.concatenate([g.index for g in self.groups]) if self.groups else np.zeros(0, np.int64)
        uniq, counts = np.unique(self.index, return_counts=True)
        if np.any(counts > 1):
            node = int(uniq[counts > 1][0])
            body = next(b for b in model.bodies if b.node_start <= node < b.node_start + b.node_count)
            raise ParameterError(f"node {node - body.node_start} of body {body.name!r} is prescribed by two pin/drive "
                                 "calls; select disjoint node sets")
        self.count = len(self.index)
        self._index_arr = backend.int_array(self.index)
        self._vals, self._ends = backend.vec3_array(self.count), backend.vec3_array(self.count)

    def start(self) -> list:
        """The groups' positions (``Pose`` of a kinematic body) at t = 0: ``State.prescribed`` of a new run."""
        return [np.array(x) if not isinstance(x, Pose) else Pose(x.origin.copy(), x.rotation.copy())
                for x in self._start]

    def values(self, t: float, dt: float, integrator: str, prescribed: list) -> tuple[np.ndarray, np.ndarray]:
        """(k, 3) v̂ and (k, 3) end-of-step velocity of all prescribed nodes for the step from t; advances
        ``prescribed`` (``State.prescribed``: each group's current positions) to t + dt."""
        v_hat, v_end = [], []
        for k, g in enumerate(self.groups):
            x_now, n = prescribed[k], len(g.index)
            if g.kind == "pose":
                (c0, R0), (c1, R1) = x_now, evaluate_motion(g.motion, t + dt, f"rigid body {g.name!r}")
                w = cayley_velocity(R0, R1, dt)
                vh = np.stack([(c1 + R1 @ g.com_local - c0 - R0 @ g.com_local) / dt, w])
                ve = vh
                x_next = Pose(c1, R1)
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
        integ.scatter_prescribed(self._index_arr, self._vals, self._ends, v_fixed, v_end, self.count)


class Loads:
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
        rigid_index = {name: k for k, name in enumerate(m.rigid_names)}
        for load in self.control.loads.values():
            f = load.force
            if load.body in rigid_index:
                k = rigid_index[load.body]
                rigid.append((k, int(m.rigid_lin[k]), f))
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
            R = quat_to_matrix(backend.read(state.q, self.model.n_rot).astype(np.float64, copy=False))
            for k, lin, bf in self._rigid:
                value = _force_value(bf.value, t)
                if bf.torque:
                    f[lin + 1] += value
                    continue
                f[lin] += value
                if bf.point is not None:
                    f[lin + 1] += np.cross(R[k] @ (bf.point - self.model.rigid_com_local_np[k]), value)
        backend.write(self.f_ext, f)         # host view on the CPU: no copy kernel


def _force_value(fn, t: float) -> np.ndarray:
    if not callable(fn):
        return fn
    value = np.asarray(fn(t), float)
    if value.shape != (3,) or not np.isfinite(value).all():
        raise ParameterError(f"force function returned {value!r} at t={t:g}; expected 3 finite numbers")
    return value

