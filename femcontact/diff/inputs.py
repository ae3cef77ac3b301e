"""What a step can be differentiated by, and the State kept in memory (``femcontact.diff``).

A step's inputs, by name (``resolve``):

- start-of-step state: ``"x"`` the positions of the translational blocks (3 per block, m), ``"R"`` the
  rotations of the rotational blocks (rigid bodies, rod segments) as a world-frame rotation vector δ
  (R → exp([δ]×) R, rad), ``"v"`` every block's velocity (m/s, rad/s), ``"v_hat"`` the previous step's
  solution v̂ (the warm start; it enters only Lagged's lagged normal impulse under the midpoint rule);
- controls of the step: ``"force:<load>"`` a constant load's (3,) value (N or N m; ``Control.loads``),
  ``"effort:<joint>"`` a joint's constant feedforward effort, ``"target:<joint>"`` a drive's constant
  target position;
- scene parameters: ``"mu:<pair>"`` the friction coefficient of a contact-parameter row (μ₁ = μ₂;
  ``<pair>``: an obstacle's name, ``a-b`` for a ``set_contact`` pair, ``bodies`` for the body-body
  default, or the row number), ``"stiffness:<pair>"`` and ``"dissipation:<pair>"`` its contact stiffness
  (N/m) and dissipation (Hunt & Crossley d, s/m, under Lagged/Similar; SAP's τ_d, s) (explicit values
  only: an automatic one has no value to vary), ``"E:<body>"`` and ``"rho:<body>"`` an FEM body's
  Young's modulus (Lamé parameters at fixed Poisson ratio) and density (its lumped masses),
  ``"mass:<body>"`` a rigid body's mass (its inertia scaled with it: the density of a fixed shape).

Each ``Input`` applies a change ``delta`` (size ``Input.size``) to the simulator and returns how to
undo it; state inputs change the State (undone by restoring a ``Snapshot``), controls and parameters
the Control and the Model (undone by their own ``undo``). ``Snapshot`` / ``restore``: the State in
memory, restored bit for bit (the working precision's arrays are copied back unconverted)."""
from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from .. import backend
from ..errors import ParameterError
from ..math.quaternion import quat_mul
from ..spec.names import CONTACT_PARAM_COLUMNS

STATE_INPUTS = ("x", "R", "v", "v_hat")
OUTPUTS = ("x", "R", "v", "v_hat")


# ---------------------------------------------------------------------------- the State in memory
@dataclass
class Snapshot:
    """The State of ``sim`` (device arrays copied in the working precision, host parts deep-copied) and
    the length of its step log."""

    arrays: dict
    host: dict
    anchors: dict | None
    solver: dict | None
    n_stats: int


def snapshot(sim) -> Snapshot:
    s = sim.state
    arrays = {k: getattr(s, k).to_numpy() for k in ("x", "v", "v_hat", "q")}
    host = {"time": s.time, "step": s.step, "prescribed": copy.deepcopy(s.prescribed),
            "joint_angles": None if s.joint_angles is None else np.array(s.joint_angles), "meta": dict(s.meta)}
    anchors = None if s.anchors is None else copy.deepcopy(s.anchors.memory())
    solver = None if s.solver is None else copy.deepcopy(s.solver.memory())
    return Snapshot(arrays, host, anchors, solver, len(sim.stats))


def restore(sim, snap: Snapshot, stepped: bool = False) -> None:
    """Put ``snap`` back into ``sim.state`` (bit for bit); ``stepped``: steps were taken since, so their log
    entries are dropped and the observers reset (as after ``load_checkpoint``)."""
    s = sim.state
    for k, a in snap.arrays.items():
        getattr(s, k).from_numpy(a)
    s.time, s.step = snap.host["time"], snap.host["step"]
    s.prescribed = copy.deepcopy(snap.host["prescribed"])
    s.joint_angles = None if snap.host["joint_angles"] is None else np.array(snap.host["joint_angles"])
    s.meta = dict(snap.host["meta"])
    if snap.anchors is not None:
        s.anchors.restore(snap.anchors["keys"], snap.anchors["points"], snap.anchors["values"])
    if snap.solver is not None:
        s.solver.restore(copy.deepcopy(snap.solver))
    if stepped:
        del sim.stats[snap.n_stats:]
        for observer in sim.observers:
            observer.reset(s)


# ---------------------------------------------------------------------------- block sets
def translational(model) -> np.ndarray:
    """The blocks whose x is a position (not rotational)."""
    return np.flatnonzero(~model.is_rotational)


def rotation_vector_quat(delta: np.ndarray) -> np.ndarray:
    """(k, 3) rotation vectors -> (k, 4) unit quaternions (w, x, y, z) of exp([δ]×)."""
    delta = np.asarray(delta, float).reshape(-1, 3)
    a = np.linalg.norm(delta, axis=1)
    w = np.cos(0.5 * a)
    k = np.where(a > 1e-12, np.sin(0.5 * a) / np.where(a > 1e-12, a, 1.0), 0.5 - a * a / 48.0)
    return np.concatenate([w[:, None], k[:, None] * delta], axis=1)


def rotation_difference(q1: np.ndarray, q0: np.ndarray) -> np.ndarray:
    """(k, 3) world-frame rotation vectors δ with R(q1) = exp([δ]×) R(q0)."""
    d = quat_mul(q1, q0 * np.array([1.0, -1.0, -1.0, -1.0]))
    d = d * np.where(d[:, :1] < 0, -1.0, 1.0)
    s = np.linalg.norm(d[:, 1:], axis=1)
    ang = 2.0 * np.arctan2(s, d[:, 0])
    f = np.where(s > 1e-15, ang / np.where(s > 1e-15, s, 1.0), 2.0)
    return f[:, None] * d[:, 1:]


def end_state(sim) -> dict:
    """The state a step's derivatives are of: ``OUTPUTS`` as float64 arrays (x of the translational
    blocks, the rotational blocks' quaternions, every block's velocity, the step's solution v̂: the next
    step's warm start)."""
    s, m = sim.state, sim.model
    return {"x": s.positions()[translational(m)].copy(), "R": s.quaternions().copy(), "v": s.velocities().copy(),
            "v_hat": backend.read(s.v_hat, m.n_nodes).astype(np.float64, copy=True)}


def output_difference(a: dict, b: dict) -> np.ndarray:
    """The flat output vector (x, R as rotation vectors, v, v̂) of ``a`` minus ``b`` (``end_state``s)."""
    return np.concatenate([(a["x"] - b["x"]).ravel(), rotation_difference(a["R"], b["R"]).ravel(),
                           (a["v"] - b["v"]).ravel(), (a["v_hat"] - b["v_hat"]).ravel()])


def output_sizes(model) -> dict:
    """Rows of each output in the flat vector (``OUTPUTS`` order); the state inputs of the same names have
    the same layout, so a step's outputs are the next step's inputs."""
    return {"x": 3 * len(translational(model)), "R": 3 * model.rigid.n_rot, "v": 3 * model.n_nodes,
            "v_hat": 3 * model.n_nodes}


# ---------------------------------------------------------------------------- inputs
@dataclass
class Input:
    """One named input of a step: ``size`` numbers, ``step`` the finite-difference step of each,
    ``apply(sim, delta)`` changes it by ``delta`` and returns the undo (None for state inputs:
    restoring the Snapshot undoes them)."""

    name: str
    size: int
    step: float
    apply: Callable[[object, np.ndarray], Callable[[], None] | None]


def _state_array(field: str, rows: np.ndarray):
    def apply(sim, delta):
        arr = getattr(sim.state, field)
        a = arr.to_numpy()
        a[rows] = (a[rows].astype(np.float64) + delta.reshape(-1, 3)).astype(a.dtype)
        arr.from_numpy(a)
    return apply


def _rotations(sim, delta):
    q = sim.state.q.to_numpy()
    n = sim.model.rigid.n_rot
    q[:n] = quat_mul(rotation_vector_quat(delta), q[:n].astype(np.float64)).astype(q.dtype)
    sim.state.q.from_numpy(q)


def _scene_length(model) -> float:
    x = model.rest_positions[translational(model)]
    return float(np.ptp(x, axis=0).max()) if len(x) > 1 else 1.0


def resolve(sim, wrt) -> list[Input]:
    """The ``Input``s named by ``wrt`` (a name or a sequence of names, module docstring)."""
    names = [wrt] if isinstance(wrt, str) else list(wrt)
    if not names:
        raise ParameterError("step_derivatives: wrt names no input")
    out = []
    for name in names:
        if not isinstance(name, str):
            raise ParameterError(f"step_derivatives: an input is named by a string, got {name!r}")
        out.append(_input(sim, name))
    if len({i.name for i in out}) != len(out):
        raise ParameterError(f"step_derivatives: an input is named twice in {names}")
    return out


def _input(sim, name: str) -> Input:
    m = sim.model
    length = max(_scene_length(m), 1e-3)
    if name == "x":
        rows = translational(m)
        return Input(name, 3 * len(rows), 1e-6 * length, _state_array("x", rows))
    if name == "R":
        return Input(name, 3 * m.rigid.n_rot, 1e-6, _rotations)
    if name in ("v", "v_hat"):
        vmax = float(np.abs(sim.state.velocities()).max(initial=0.0))
        return Input(name, 3 * m.n_nodes, 1e-6 * max(vmax, 1.0), _state_array(name, np.arange(m.n_nodes)))
    kind, sep, what = name.partition(":")
    if not sep or not what:
        raise ParameterError(f"step_derivatives: unknown input {name!r}; inputs: {', '.join(STATE_INPUTS)}, "
                             "force:<load>, effort:<joint>, target:<joint>, mu:<pair>, stiffness:<pair>, "
                             "dissipation:<pair>, E:<body>, rho:<body>, mass:<body>")
    makers = {"force": _load, "effort": _effort, "target": _target, "mu": _contact_param,
              "stiffness": _contact_param, "dissipation": _contact_param, "E": _young, "rho": _density,
              "mass": _rigid_mass}
    if kind not in makers:
        raise ParameterError(f"step_derivatives: unknown input kind {kind!r} in {name!r}; kinds: "
                             f"{', '.join(makers)}")
    return makers[kind](sim, name, kind, what)


def _constant(value, what: str) -> float | np.ndarray:
    if callable(value) or value is None:
        raise ParameterError(f"step_derivatives: {what} is {'a function of time' if value else 'not set'}; "
                             "only a constant one can be differentiated by")
    return value


def _load(sim, name, kind, what) -> Input:
    loads = sim.control.loads
    if what not in loads:
        raise ParameterError(f"step_derivatives: no load named {what!r} (loads: {sorted(loads)})")
    load = loads[what]
    attr = "value" if hasattr(load.force, "value") else "force"
    base = np.asarray(_constant(getattr(load.force, attr), f"load {what!r}"), float)

    def apply(sim, delta):
        sim.control.set_load(what, replace(load, force=replace(load.force, **{attr: base + delta})))
        return lambda: sim.control.set_load(what, load)
    return Input(name, 3, 1e-6 * max(float(np.abs(base).max()), 1.0), apply)


def _effort(sim, name, kind, what) -> Input:
    c = sim.control
    base = _constant(c.effort_command(what), f"the effort of joint {what!r}")
    c.set_joint_effort(what, base)                  # the same command: checks that the joint has a coordinate

    def apply(sim, delta):
        c.set_joint_effort(what, float(base) + float(delta[0]))
        return lambda: c.set_joint_effort(what, base)
    return Input(name, 1, 1e-6 * max(abs(float(base)), 1.0), apply)


def _target(sim, name, kind, what) -> Input:
    c = sim.control
    d = c.joint_drive(what)
    if d is None:
        raise ParameterError(f"step_derivatives: joint {what!r} has no drive (driven joints: {c.driven_joints})")
    base = _constant(d.target, f"the drive target of joint {what!r}")

    def apply(sim, delta):
        c.set_joint_drive(what, target=float(base) + float(delta[0]))
        return lambda: c.set_joint_drive(what, target=base)
    return Input(name, 1, 1e-6 * max(abs(float(base)), 1.0), apply)


def _row(sim, what: str) -> int:
    names = list(sim.model.contact.row_names)
    if what == "bodies":
        return 0
    if what in names:
        return names.index(what)
    if what.isdigit() and int(what) < len(names):
        return int(what)
    raise ParameterError(f"step_derivatives: no contact pair {what!r}; pairs: bodies, {', '.join(names[1:])} "
                         f"or a row number < {len(names)}")


def _contact_param(sim, name, kind, what) -> Input:
    from ..contact.schema import PARAM_F

    row = _row(sim, what)
    m = sim.model
    table = m.contact_params
    if kind == "mu":
        cols = [CONTACT_PARAM_COLUMNS.index("mu1"), CONTACT_PARAM_COLUMNS.index("mu2")]
    else:
        col = "stiffness" if kind == "stiffness" else ("tau_d" if sim.contact_solver.name == "sap" else "hc_dissipation")
        cols = [CONTACT_PARAM_COLUMNS.index(col)]
    base = table[row, cols].copy()
    if np.isnan(base).any():
        raise ParameterError(f"step_derivatives: {name}: the pair's {kind} is automatic; give it a value "
                             "(scene.set_contact / the obstacle's contact parameters) to differentiate by it")
    if kind == "mu" and base[0] != base[1]:
        raise ParameterError(f"step_derivatives: {name}: anisotropic friction (μ₁ ≠ μ₂) is not a single μ")
    tables = sim.collision.tables if sim.collision is not None else None

    def apply(sim, delta):
        table[row, cols] = base + float(delta[0])
        old = None
        if kind == "mu" and tables is not None:
            old = tables.params
            tables.params = PARAM_F.upload(len(table), mu=table[:, :2], axis=m.contact.axes)

        def undo():
            table[row, cols] = base
            if old is not None:
                tables.params = old
        return undo
    return Input(name, 1, 1e-6 * max(abs(float(base[0])), 1e-3), apply)


def _body(sim, what: str, kind: str):
    try:
        b = sim.model.body(what)
    except KeyError as exc:
        raise ParameterError(f"step_derivatives: {exc.args[0]}") from None
    if b.kind != kind:
        raise ParameterError(f"step_derivatives: body {what!r} is a {b.kind} body, not {kind}")
    return b


def _scaled(arrays: list, factor_of: Callable[[float], float]):
    """apply(sim, delta) scaling the (ndarray-like, index) pairs ``arrays`` by ``factor_of(delta)``."""
    def apply(sim, delta):
        f = factor_of(float(delta[0]))
        saved = []
        for arr, idx in arrays:
            host = isinstance(arr, np.ndarray)
            a = arr if host else arr.to_numpy()
            saved.append(a[idx].copy())
            a[idx] = a[idx] * f
            if not host:
                arr.from_numpy(a)

        def undo():
            for (arr, idx), old in zip(arrays, saved):
                host = isinstance(arr, np.ndarray)
                a = arr if host else arr.to_numpy()
                a[idx] = old
                if not host:
                    arr.from_numpy(a)
        return undo
    return apply


def _young(sim, name, kind, what) -> Input:
    b = _body(sim, what, "fem")
    m = sim.model
    E = sim.scene.fem_bodies[[x.name for x in sim.scene.fem_bodies].index(what)].material.youngs_modulus
    apply = _scaled([(m.mu, b.tets), (m.lam, b.tets)], lambda d: (E + d) / E)
    return Input(name, 1, 1e-6 * E, apply)


def _mass_arrays(sim, nodes: np.ndarray, body: int) -> list:
    """The host and device copies of the lumped masses of ``nodes`` (of body index ``body``)."""
    m = sim.model
    out = [(m.mass, nodes), (m.mass_alpha, nodes), (m.mass_np, nodes), (m.dofs.mass, nodes),
           (m.dofs.body_mass, np.array([body]))]
    solver = sim.contact_solver
    if hasattr(solver, "lumped_blocks"):
        mine = np.isin(solver.lumped_nodes, nodes)
        out.append((solver.lumped_blocks, np.flatnonzero(mine)))
    return out


def _density(sim, name, kind, what) -> Input:
    b = _body(sim, what, "fem")
    spec = sim.scene.fem_bodies[[x.name for x in sim.scene.fem_bodies].index(what)]
    rho = float(spec.material.density)
    nodes = np.arange(b.node_start, b.node_start + b.node_count)
    apply = _scaled(_mass_arrays(sim, nodes, sim.model.bodies.index(b)), lambda d: (rho + d) / rho)
    return Input(name, 1, 1e-6 * rho, apply)


def _rigid_mass(sim, name, kind, what) -> Input:
    b = _body(sim, what, "rigid")
    m = sim.model
    k = m.rigid.index(what)
    mass = float(m.rigid.mass[k])
    lin = np.array([b.node_start])
    arrays = _mass_arrays(sim, lin, m.bodies.index(b)) + [(m.rigid.mass, np.array([k])),
                                                          (m.rigid.rot_inertia, np.flatnonzero(m.rigid.rot_block_np == b.node_start + 1))]
    apply = _scaled(arrays, lambda d: (mass + d) / mass)
    return Input(name, 1, 1e-6 * mass, apply)


def direct_state(inp: Input, delta: np.ndarray, model) -> dict:
    """What a state input's change ``delta`` does to the end state at a fixed step solution: x₁ moves
    with x₀, R₁ with R₀ (through the step's rotation, applied by the caller), v_k enters v_{k+1} = c_h v̂ +
    c_o v_k. Returns {"x": (n_t, 3), "R": (n_rot, 3), "v": (n, 3)} start-of-step changes."""
    n_t, n_rot, n = len(translational(model)), model.rigid.n_rot, model.n_nodes
    out = {"x": np.zeros((n_t, 3)), "R": np.zeros((n_rot, 3)), "v": np.zeros((n, 3))}
    if inp.name in ("x", "R", "v"):
        out[inp.name] = np.asarray(delta, float).reshape(-1, 3)
    return out
