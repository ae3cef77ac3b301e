"""What a user reads of a run now: positions, velocities, poses, strains, stresses, energies and
contact forces, from a Model and a State (the ``Simulator`` methods of the same names call these).

Every function reads; only ``set_rigid_velocity`` writes (the State's velocities and warm start).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from . import backend
from .assembly import integrator as integ
from .bodies import fem
from .errors import ParameterError
from .math.quaternion import quat_to_matrix
from .spec.validation import vec3


def body(model, name: str):
    """The ``BodyRange`` of body ``name`` (a ParameterError naming the bodies if there is none)."""
    try:
        return model.body(name)
    except KeyError as exc:
        raise ParameterError(str(exc.args[0])) from None


def rigid_index(model, name: str) -> int:
    """Index of rigid body ``name`` among the Model's rigid bodies."""
    try:
        return model.rigid.index(name)
    except KeyError as exc:
        raise ParameterError(str(exc.args[0])) from None


def rigid_pose(model, state, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(centre of mass (3,) m, rotation (3, 3)) of a rigid body now."""
    k = rigid_index(model, name)
    return state.positions()[int(model.rigid.lin[k])], quat_to_matrix(state.quaternions()[k])


def rigid_velocity(model, state, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(centre-of-mass velocity (3,) m/s, angular velocity (3,) rad/s), world frame."""
    lin = int(model.rigid.lin[rigid_index(model, name)])
    v = state.velocities()
    return v[lin], v[lin + 1]


def set_rigid_velocity(model, state, name: str, linear=None, angular=None) -> None:
    """Set a rigid body's centre-of-mass velocity (m/s) and/or world angular velocity (rad/s) in the State
    and its warm start."""
    lin = int(model.rigid.lin[rigid_index(model, name)])
    v, real = state.velocities(), backend.np_real()
    for k, value, what in ((lin, linear, "linear"), (lin + 1, angular, "angular")):
        if value is not None:
            v[k] = vec3(value, f"{what} velocity of {name!r}")
    state.v.from_numpy(v.astype(real))
    v_hat = state.v_hat.to_numpy()
    v_hat[: len(v)] = v
    state.v_hat.from_numpy(v_hat.astype(real))


def rod(rods, name: str):
    """The ``RodRange`` (``femcontact.bodies.rod``) of rod ``name``."""
    ranges = rods.ranges if rods is not None else []
    for r in ranges:
        if r.name == name:
            return r
    raise ParameterError(f"no rod named {name!r}; rods: {[r.name for r in ranges]}")


def rod_strains(rods, state, name: str) -> dict:
    """Per-segment strains of a rod now: stretch, shear, bend (1/m), twist (rad/m)."""
    return rods.range_strains(rod(rods, name), state.positions(), state.quaternions())


def von_mises(model, state) -> np.ndarray:
    """(n_tets,) von Mises stress of every element, Pa."""
    if not model.n_tets:
        return np.zeros(0)          # no FEM body: nothing to compile or launch
    out = backend.scalar_array(model.n_tets)
    fem.stress_and_energy(state.x, model.tets, model.dm_inv, model.vol, model.mu, model.lam, out)
    return out.to_numpy()[: model.n_tets].astype(np.float64)


def elastic_forces(model, state, x: Optional[np.ndarray] = None) -> np.ndarray:
    """(n, 3) elastic nodal forces of the FEM elements (N) at positions x (default: the State's)."""
    xa = state.x if x is None else backend.vec3_array(model.n_nodes, x)
    f = backend.vec3_array(model.n_nodes)
    fem.elastic_forces(xa, model.tets, model.dm_inv, model.vol, model.mu, model.lam, f)
    return f.to_numpy()[: model.n_nodes].astype(np.float64)


def energy(model, state, systems, scratch) -> dict:
    """Kinetic (translational and rotational), elastic (every body system's) and gravitational potential
    energy (J); ``scratch``: a 2-element device array the kernel sums into."""
    backend.write(scratch, np.zeros(2, backend.np_real()))     # host views on the CPU: no copy kernels
    integ.kinetic_and_gravity(model.mass, state.x, state.v, model.gravity_arr, scratch)
    kin, grav = (float(e) for e in backend.read(scratch, 2))
    if model.rigid.n_rot:
        R = quat_to_matrix(state.quaternions())
        w = state.velocities()[model.rigid.rot_block_np]
        Om = np.einsum("kji,kj->ki", R, w)
        kin += 0.5 * float(np.einsum("ki,kij,kj->", Om, model.rigid.rot_inertia_np, Om))
    elastic = sum(system.elastic_energy(state) for system in systems)
    return {"kinetic": kin, "elastic": elastic, "gravity": grav, "total": kin + elastic + grav}


def rigid_contact_forces(model, contacts, dt: float, with_contact: bool) -> dict[str, np.ndarray]:
    """Net contact force (N, world frame) on every rigid body over the last step: the body's
    translational block of ``Jᵀλ / dt`` (λ: the contact impulses; bodies without contact: 0)."""
    forces = np.zeros((model.n_nodes, 3))
    if with_contact and contacts.count:
        d = contacts.to_numpy()
        forces = (contacts.jacobian(True, d).T @ d["impulse"].ravel()).reshape(-1, 3) / dt
    return {name: forces[int(model.rigid.lin[k])].copy() for k, name in enumerate(model.rigid.names)}
