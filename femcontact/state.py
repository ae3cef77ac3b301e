"""State: everything a step changes, and the checkpoint file that restores it bit for bit."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from . import backend
from .backend import ti
from .errors import ParameterError
from .model import Model

CHECKPOINT_VERSION = 1


class State:
    """Time-varying data of a run (host reads through ``backend.read``: a view, no copy kernel, on the CPU).

    x, v: (n, 3) block positions (m) and velocities (m/s; a rotational block holds the world
    angular velocity, rad/s, and its x has no meaning); q: orientations (w, x, y, z) of the
    rotational blocks; v_hat: the last step's solution v̂, the next step's warm start; time (s);
    step index. ``host`` holds host-side arrays a step changes (e.g. the current positions of
    prescribed nodes), ``solver_memory`` what the contact solver carries from one step to the next
    (recycled step matrix, Chebyshev ϱ, ...); both are saved with the state, so a checkpoint
    continues a run bit for bit. ``meta`` (str -> str) is saved with it too: what the checkpoint
    belongs to (the series it continues, the scene script's hash), checked by a resume.
    """

    def __init__(self, model: Model):
        self.x = backend.vec3_array(model.n_nodes, model.rest_positions)
        self.v = backend.vec3_array(model.n_nodes, model.initial_velocities)
        self.v_hat = backend.vec3_array(model.n_nodes, model.initial_velocities)
        self.q = ti.Vector.ndarray(4, float, shape=max(model.n_rot, 1))   # rotational blocks' (w, x, y, z)
        if model.n_rot:
            self.q.from_numpy(model.rot_q0_np.astype(backend.np_real()))
        self.time = 0.0
        self.step = 0
        self.host: dict[str, np.ndarray] = {}
        self.solver_memory: dict[str, np.ndarray] = {}
        self.meta: dict[str, str] = {}
        self._n = model.n_nodes
        self._n_rot = model.n_rot

    def positions(self) -> np.ndarray:
        """(n, 3) positions of all nodes, m."""
        return backend.read(self.x, self._n).astype(np.float64, copy=False)

    def velocities(self) -> np.ndarray:
        """(n, 3) velocities of all nodes, m/s."""
        return backend.read(self.v, self._n).astype(np.float64, copy=False)

    def quaternions(self) -> np.ndarray:
        """(n_rot, 4) orientation quaternions (w, x, y, z) of the rotational blocks."""
        return backend.read(self.q, self._n_rot).astype(np.float64, copy=False)

    def save(self, path: str | Path) -> Path:
        """Write a checkpoint (``.npz``) atomically: a temporary file in the same folder, then a
        rename, so an interrupted save never leaves a truncated checkpoint. Arrays are stored in
        the working precision, unconverted, so ``load`` restores them bit for bit."""
        path = Path(path)
        if path.suffix != ".npz":
            path = path.with_name(path.name + ".npz")
        arrays = {"version": np.int64(CHECKPOINT_VERSION), "x": self.x.to_numpy(), "v": self.v.to_numpy(),
                  "v_hat": self.v_hat.to_numpy(), "q": self.q.to_numpy(), "time": np.float64(self.time),
                  "step": np.int64(self.step), "precision": np.str_(backend.np_real().__name__)}
        arrays.update({f"host/{k}": np.asarray(a) for k, a in self.host.items()})
        arrays.update({f"solver/{k}": np.asarray(a) for k, a in self.solver_memory.items()})
        arrays.update({f"meta/{k}": np.str_(v) for k, v in self.meta.items()})
        tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
        try:
            with open(tmp, "wb") as fh:
                np.savez(fh, **arrays)
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                tmp.unlink()
        return path

    def load(self, path: str | Path) -> None:
        """Restore a checkpoint written by ``save`` for the same model and precision."""
        path = Path(path)
        if not path.is_file():
            raise ParameterError(f"checkpoint {path} does not exist")
        with np.load(path) as data:
            if "version" not in data or int(data["version"]) != CHECKPOINT_VERSION:
                raise ParameterError(f"{path} is not a femcontact checkpoint of version {CHECKPOINT_VERSION}")
            if data["x"].shape != self.x.to_numpy().shape or data["q"].shape != self.q.to_numpy().shape:
                raise ParameterError(f"checkpoint {path} holds {len(data['x'])} blocks and {len(data['q'])} "
                                     f"rotations; this model has {self._n} and {self._n_rot}: not the same scene")
            if str(data["precision"]) != backend.np_real().__name__:
                raise ParameterError(f"checkpoint {path} was written in {data['precision']}, this run uses "
                                     f"{backend.np_real().__name__}; resume with the same --precision")
            self.x.from_numpy(data["x"])
            self.v.from_numpy(data["v"])
            self.v_hat.from_numpy(data["v_hat"])
            self.q.from_numpy(data["q"])
            self.time, self.step = float(data["time"]), int(data["step"])
            self.host = {k[5:]: data[k] for k in data.files if k.startswith("host/")}
            self.solver_memory = {k[7:]: data[k] for k in data.files if k.startswith("solver/")}
            self.meta = {k[5:]: str(data[k]) for k in data.files if k.startswith("meta/")}
