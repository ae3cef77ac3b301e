"""State: everything a step changes (positions, velocities, time), with checkpoints."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import taichi as ti

from . import backend
from .errors import ParameterError
from .model import Model


class State:
    """Time-varying data: block positions x (m), velocities v (m/s; a rotational block holds the
    world angular velocity, rad/s, and its x has no meaning), orientations q of the rotational
    blocks, time (s), step index."""

    def __init__(self, model: Model):
        self.x = backend.vec3_array(model.n_nodes, model.rest_positions)
        self.v = backend.vec3_array(model.n_nodes, model.initial_velocities)
        self.q = ti.Vector.ndarray(4, float, shape=max(model.n_rot, 1))   # rotational blocks' (w, x, y, z)
        if model.n_rot:
            self.q.from_numpy(model.rot_q0_np.astype(backend.np_real()))
        self.time = 0.0
        self.step = 0
        self._n = model.n_nodes
        self._n_rot = model.n_rot

    def positions(self) -> np.ndarray:
        """(n, 3) positions of all nodes, m."""
        return self.x.to_numpy()[: self._n].astype(np.float64)

    def velocities(self) -> np.ndarray:
        """(n, 3) velocities of all nodes, m/s."""
        return self.v.to_numpy()[: self._n].astype(np.float64)

    def quaternions(self) -> np.ndarray:
        """(n_rot, 4) orientation quaternions (w, x, y, z) of the rotational blocks."""
        return self.q.to_numpy()[: self._n_rot].astype(np.float64)

    def save(self, path: str | Path) -> None:
        """Write a checkpoint (.npz) that ``load`` restores."""
        np.savez(path, x=self.positions(), v=self.velocities(), q=self.quaternions(), time=self.time, step=self.step)

    def load(self, path: str | Path) -> None:
        """Restore a checkpoint written by ``save`` for the same model."""
        data = np.load(path)
        if data["x"].shape != (self._n, 3):
            raise ParameterError(f"checkpoint {path} holds {len(data['x'])} nodes, this model has {self._n}")
        real = backend.np_real()
        self.x.from_numpy(data["x"].astype(real))
        self.v.from_numpy(data["v"].astype(real))
        if self._n_rot:
            self.q.from_numpy(data["q"].astype(real))
        self.time, self.step = float(data["time"]), int(data["step"])
