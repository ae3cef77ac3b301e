"""State: everything a step changes; a checkpoint is the State written out, and a resume reads it back.

The fields (``State``): the blocks' positions, velocities and rotations on the device, the warm
start v̂, time and step; the prescribed groups' current positions (``Model.prescribed``), the joints' unwrapped
hinge angles, the stiction anchors (a ``ContactMemory`` on the device) and the contact solver's
memory (``memory()``/``restore()``: COND's recycled step-matrix sums and ϱ, NCP-PGS's λ by contact,
...). Nothing else carries from one step to the next, so a fresh Simulator of the same scene that
loads a checkpoint continues the run bit for bit. Checkpoint files of version 1 (the same State with
its host parts in an untyped ``host/`` group) are read and converted.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Protocol

import numpy as np

from . import backend
from .backend import ti
from .bodies.prescribed import Pose
from .contact.anchors import ContactMemory
from .errors import ParameterError
from .model import Model

CHECKPOINT_VERSION = 2      # 1: host-side parts under "host/" (drive{k}, drive{k}_c/_R, hinge_angles, anchor_*)


class Memory(Protocol):
    """What a contact solver carries from one step to the next (``solvers/base.py``)."""

    def memory(self) -> dict: ...

    def restore(self, memory: dict) -> None: ...


@dataclass(init=False, eq=False)
class State:
    """Time-varying data of a run (host reads through ``backend.read``: a view, no copy kernel, on the CPU).

    x, v: (n, 3) block positions (m) and velocities (m/s; a rotational block holds the world
    angular velocity, rad/s, and its x has no meaning); q: orientations (w, x, y, z) of the
    rotational blocks; v_hat: the last step's solution v̂, the next step's warm start; time (s);
    step index; prescribed: per prescribed group (``Model.prescribed`` order) its nodes' current positions
    ((k, 3), m) or a kinematic body's ``Pose``; joint_angles: each joint's unwrapped coordinate at
    the last assembly (``JointSystem``; None before it); anchors: the stiction anchors' memory (None
    without anchors); solver: the contact solver, whose ``memory()`` is saved; meta (str -> str):
    what the checkpoint belongs to (the series it continues, the scene script's hash), checked by a
    resume.
    """

    x: Any
    v: Any
    v_hat: Any
    q: Any
    time: float
    step: int
    prescribed: list
    joint_angles: Optional[np.ndarray]
    anchors: Optional[ContactMemory]
    solver: Optional[Memory]
    meta: dict = field(default_factory=dict)

    def __init__(self, model: Model):
        self.x = backend.vec3_array(model.n_nodes, model.rest_positions)
        self.v = backend.vec3_array(model.n_nodes, model.initial_velocities)
        self.v_hat = backend.vec3_array(model.n_nodes, model.initial_velocities)
        self.q = ti.Vector.ndarray(4, float, shape=max(model.rigid.n_rot, 1))   # rotational blocks' (w, x, y, z)
        if model.rigid.n_rot:
            self.q.from_numpy(model.rigid.rot_q0_np.astype(backend.np_real()))
        self.time = 0.0
        self.step = 0
        self.prescribed = []
        self.joint_angles = None
        self.anchors = None
        self.solver = None
        self.meta = {}
        self._n = model.n_nodes
        self._n_rot = model.rigid.n_rot

    def positions(self) -> np.ndarray:
        """(n, 3) positions of all nodes, m."""
        return backend.read(self.x, self._n).astype(np.float64, copy=False)

    def velocities(self) -> np.ndarray:
        """(n, 3) velocities of all nodes, m/s."""
        return backend.read(self.v, self._n).astype(np.float64, copy=False)

    def quaternions(self) -> np.ndarray:
        """(n_rot, 4) orientation quaternions (w, x, y, z) of the rotational blocks."""
        return backend.read(self.q, self._n_rot).astype(np.float64, copy=False)

    # ------------------------------------------------------------------ the checkpoint file
    def arrays(self) -> dict[str, np.ndarray]:
        """The State as named arrays (the checkpoint's contents), device arrays in the working precision."""
        out = {"version": np.int64(CHECKPOINT_VERSION), "x": self.x.to_numpy(), "v": self.v.to_numpy(),
               "v_hat": self.v_hat.to_numpy(), "q": self.q.to_numpy(), "time": np.float64(self.time),
               "step": np.int64(self.step), "precision": np.str_(backend.np_real().__name__)}
        for k, x in enumerate(self.prescribed):
            if isinstance(x, Pose):
                out[f"prescribed/{k}/origin"], out[f"prescribed/{k}/rotation"] = (np.asarray(a, float) for a in x)
            else:
                out[f"prescribed/{k}"] = np.asarray(x, float)
        if self.joint_angles is not None:
            out["joint_angles"] = np.asarray(self.joint_angles)
        if self.anchors is not None:
            out.update({f"anchors/{k}": a for k, a in self.anchors.memory().items()})
        if self.solver is not None:
            out.update({f"solver/{k}": np.asarray(a) for k, a in self.solver.memory().items()})
        out.update({f"meta/{k}": np.str_(v) for k, v in self.meta.items()})
        return out

    def save(self, path: str | Path) -> Path:
        """Write the checkpoint (``.npz``) atomically: a temporary file in the same folder, then a
        rename, so an interrupted save never leaves a truncated checkpoint. Arrays are stored in
        the working precision, unconverted, so ``load`` restores them bit for bit."""
        path = Path(path)
        if path.suffix != ".npz":
            path = path.with_name(path.name + ".npz")
        arrays = self.arrays()
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
        """Restore a checkpoint written by ``save`` (or by version 1) for the same scene, solver and precision."""
        path = Path(path)
        if not path.is_file():
            raise ParameterError(f"checkpoint {path} does not exist")
        with np.load(path) as data:
            data = _upgrade({k: data[k] for k in data.files}, path)
        if data["x"].shape != self.x.to_numpy().shape or data["q"].shape != self.q.to_numpy().shape:
            raise ParameterError(f"checkpoint {path} holds {len(data['x'])} blocks and {len(data['q'])} "
                                 f"rotations; this model has {self._n} and {self._n_rot}: not the same scene")
        if str(data["precision"]) != backend.np_real().__name__:
            raise ParameterError(f"checkpoint {path} was written in {data['precision']}, this run uses "
                                 f"{backend.np_real().__name__}; resume with the same --precision")
        try:
            prescribed = [Pose(data[f"prescribed/{k}/origin"], data[f"prescribed/{k}/rotation"])
                          if isinstance(x, Pose) else data[f"prescribed/{k}"] for k, x in enumerate(self.prescribed)]
            if any(k.startswith(f"prescribed/{len(prescribed)}") for k in data):
                raise KeyError(f"prescribed/{len(prescribed)}")
            if self.anchors is not None:
                self.anchors.restore(data["anchors/keys"], data["anchors/points"], data["anchors/values"])
            if self.solver is not None:
                self.solver.restore({k[7:]: a for k, a in data.items() if k.startswith("solver/")})
        except KeyError as exc:
            raise ParameterError(f"checkpoint {path} lacks or has an extra {exc.args[0]!r}: it was written by "
                                 "another scene or solver") from None
        self.x.from_numpy(data["x"])
        self.v.from_numpy(data["v"])
        self.v_hat.from_numpy(data["v_hat"])
        self.q.from_numpy(data["q"])
        self.time, self.step = float(data["time"]), int(data["step"])
        self.prescribed = prescribed
        self.joint_angles = data.get("joint_angles")
        self.meta = {k[5:]: str(a) for k, a in data.items() if k.startswith("meta/")}


_V1_ANCHORS = {"anchor_keys": "anchors/keys", "anchor_points": "anchors/points", "anchor_slip": "anchors/values"}


def _upgrade(data: dict, path: Path) -> dict:
    """A checkpoint's arrays in this version's names (version 1's ``host/`` group converted), or a clear refusal."""
    version = int(data["version"]) if "version" in data else None
    if version == CHECKPOINT_VERSION:
        return data
    if version != 1:
        raise ParameterError(f"{path} is not a femcontact checkpoint of version 1 or {CHECKPOINT_VERSION}"
                             + (f" (it says version {version}: written by a newer femcontact?)" if version else ""))
    out = {}
    for key, a in data.items():
        name = key[5:] if key.startswith("host/") else None
        if name is None:
            out[key] = a
        elif name in _V1_ANCHORS:
            out[_V1_ANCHORS[name]] = a
        elif name == "hinge_angles":
            out["joint_angles"] = a
        elif name.startswith("drive"):          # drive{k}, or drive{k}_c / drive{k}_R of a kinematic body
            k, _, part = name[5:].partition("_")
            out[f"prescribed/{k}" + {"": "", "c": "/origin", "R": "/rotation"}[part]] = a
        else:
            raise ParameterError(f"checkpoint {path} (version 1) holds an unknown entry {key!r}")
    return out
