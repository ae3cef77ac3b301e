"""Each joint kind of ``femcontact/bodies/joint_kinds.py`` on its own, against finite differences.

At random configurations on a joint's constraint manifold (random parent pose and free motion: hinge
angle, prismatic slide, ball rotation) plus a random violation of 1e-7 m / rad (the size the stiff
rows keep), for every kind with a rigid parent and with the world as parent:

- the residual ``−Σ Jᵀ K e`` is minus the gradient of the energy ``Σ ½ eᵀ K e`` (central differences
  of the energy over the joint's blocks: translations of the centres, rotations ``R ← exp(δθ) R``);
- the stiffness ``Σ Jᵀ K J`` is minus the derivative of the residual (central differences): the
  consistent tangent where the rows hold, up to the dropped geometric part ``O(|e|)``;

likewise the mimic coupling on two hinges and on two prismatic joints, and the limit's damper row
in both states (engaged: its impulse against the solved rate; free: no terms).
"""
import zlib

import numpy as np
import pytest
from scipy.linalg import block_diag
from scipy.spatial.transform import Rotation

import femcontact as fc
from tests.helpers.fdcheck import central_jacobian, scaled_error
from femcontact.assembly.integrator import coefficients
from femcontact.bodies.joint_kinds import (JOINT_CLASSES, Configuration, Limit, MimicCoupling, RowSums,
                                           residual_and_stiffness)
from femcontact.geometry import shapes
from femcontact.spec.joint import JOINT_KINDS, Mimic

KINDS = ["ball", "weld", "hinge", "prismatic"]
VIOLATION = 1e-8      # m, rad: the constraint error where the residual is checked
TOL = 1e-6            # relative error of residual and stiffness (O(VIOLATION) + differencing)
SAMPLES = 6
LEVER = 0.1            # m: a torque's error counts as a force's at this lever


@pytest.fixture(scope="module")
def system():
    """One scene: for every kind a joint between two boxes and one from the world to a box, with
    the anchor off both centres and a skew axis; two mimic pairs (hinges, prismatic joints)."""
    scene = fc.Scene(solver="cond", dt=1e-2)
    box = shapes.Box((0.08, 0.05, 0.03))
    axis = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])
    x = 0.0

    def body(name, mass=1.0):
        nonlocal x
        x += 0.3
        scene.add_rigid_body(box, mass=mass, position=(x, 0.1 * np.sin(7 * x), 0.5 + 0.05 * np.cos(5 * x)),
                             rotation=Rotation.from_rotvec([x, -0.5 * x, 0.3]).as_matrix(), name=name)
        return scene.body(name).com

    for kind in KINDS:
        pa, pb = body(f"{kind}_a", 1.3), body(f"{kind}_b", 0.7)
        scene.add_joint(kind, f"{kind}_a", f"{kind}_b", anchor=0.5 * (pa + pb) + [0.0, 0.01, 0.02], axis=axis,
                        name=kind)
        pw = body(f"{kind}_w", 0.9)
        scene.add_joint(kind, None, f"{kind}_w", anchor=pw + [0.03, -0.02, 0.01], axis=axis, name=f"{kind}_world")
    for kind in ("hinge", "prismatic"):
        base = body(f"m{kind}_base", 2.0)
        lead, follow = body(f"m{kind}_lead", 0.5), body(f"m{kind}_follow", 0.6)
        scene.add_joint(kind, f"m{kind}_base", f"m{kind}_lead", anchor=0.5 * (base + lead), axis=axis,
                        name=f"m{kind}_lead")
        spec = scene.add_joint(kind, f"m{kind}_base", f"m{kind}_follow", anchor=0.5 * (base + follow) + 0.01,
                               axis=axis[::-1], name=f"m{kind}_follow")
        spec.mimic = Mimic(f"m{kind}_lead", -0.7, 0.05)
    sim = fc.Simulator(scene)
    return sim.model.joints


def _joint(system, name):
    return next(j for j in system.joints if j.name == name)


def _rest_configuration(system) -> Configuration:
    model = system.model
    R = model.rigid.rotation0.copy()
    return Configuration(model.rest_positions.copy(), np.zeros_like(model.rest_positions), R, model.dt)


def _place(joint, conf, rng, coordinate=None):
    """Put the joint's child on its manifold at coordinate ``coordinate`` (hinge angle, slide; random
    when None), its parent (unless the world, or already placed) at a random pose near the origin."""
    A, B = joint.A, joint.B
    if not A.world and coordinate is None:
        conf.x[A.lin] = 0.05 * rng.standard_normal(3)
        conf.R[A.k] = Rotation.random(random_state=rng).as_matrix()
    cA, RA = conf.pose(A)
    pA = cA + RA @ joint.anchor_A if not A.world else joint.anchor_A
    wA = RA @ joint.axis_A
    if coordinate is None:
        coordinate = rng.uniform(-3.0, 3.0) if joint.kind == "hinge" else rng.uniform(-0.05, 0.05)
    free = {"hinge": Rotation.from_rotvec(coordinate * joint.axis_A).as_matrix(),
            "ball": Rotation.random(random_state=rng).as_matrix()}.get(joint.kind, np.eye(3))
    RB = RA @ free @ joint.R_rel
    pB = pA + (coordinate * wA if joint.kind == "prismatic" else 0.0)
    conf.R[B.k] = RB
    conf.x[B.lin] = pB - RB @ joint.anchor_B


def _violate(conf, sides, rng):
    for side in sides:
        if not side.world:
            conf.x[side.lin] += VIOLATION * rng.standard_normal(3)
            conf.R[side.k] = Rotation.from_rotvec(VIOLATION * rng.standard_normal(3)).as_matrix() @ conf.R[side.k]


def _moved(conf, blocks, rigid_of, delta):
    """The configuration displaced by ``delta`` (3 per block): centres translated, rotations turned."""
    x, R = conf.x.copy(), conf.R.copy()
    for i, blk in enumerate(blocks):
        k, angular = rigid_of[blk]
        if angular:
            R[k] = Rotation.from_rotvec(delta[3 * i:3 * i + 3]).as_matrix() @ R[k]
        else:
            x[blk] = x[blk] + delta[3 * i:3 * i + 3]
    return Configuration(x, conf.v, R, conf.dt)


def _flat(sums: RowSums, blocks):
    """(residual, stiffness) of RowSums as a vector and a matrix over ``blocks`` (3 per block)."""
    n = 3 * len(blocks)
    f, K = np.zeros(n), np.zeros((n, n))
    where = {b: 3 * i for i, b in enumerate(blocks)}
    for a, vec in sums.vector.items():
        f[where[a]:where[a] + 3] = vec
    for (a, c), M in sums.matrix.items():
        K[where[a]:where[a] + 3, where[c]:where[c] + 3] = M
    return f, K


def _residual_error(rows_at, residual_and_stiffness_at, blocks, conf, rigid_of) -> float:
    """Residual vs −∇ of the energy ``Σ ½ eᵀ K e`` of the rows ``rows_at(conf)`` at ``conf``, relative,
    torques counted as forces at a lever of LEVER. The gradient is taken as ``Σ (∂e/∂q)ᵀ K e`` with
    ``∂e/∂q`` by central differences: differencing the tiny energy itself would lose the digits of e
    to rounding."""
    f, _ = _flat(residual_and_stiffness_at(conf), blocks)
    rows = rows_at(conf)
    errors = lambda d: np.concatenate([r.e for r in rows_at(_moved(conf, blocks, rigid_of, d))])
    de = central_jacobian(errors, np.zeros(len(f)), 1e-6)
    grad = de.T @ (block_diag(*[r.K for r in rows]) @ np.concatenate([r.e for r in rows]))
    weight = np.repeat([1.0 / LEVER if rigid_of[b][1] else 1.0 for b in blocks], 3)
    return float(np.abs((grad + f) * weight).max() / np.abs(f * weight).max())


def _stiffness_error(residual_and_stiffness_at, blocks, conf, rigid_of) -> float:
    """Stiffness vs −∂ residual (central differences) at ``conf`` (``scaled_error``)."""
    f, K = _flat(residual_and_stiffness_at(conf), blocks)
    K_fd = -central_jacobian(lambda d: _flat(residual_and_stiffness_at(_moved(conf, blocks, rigid_of, d)),
                                             blocks)[0], np.zeros(len(f)), 1e-6)
    return scaled_error(K, K_fd)


def _rows_of(joint):
    return lambda conf: joint.rows(joint.geometry(conf), conf.dt)


def _rigid_of(system):
    out = {}
    for k, lin in enumerate(system.model.rigid.lin):
        out[int(lin)], out[int(lin) + 1] = (k, False), (k, True)
    return out


def test_every_joint_kind_has_a_class():
    assert set(JOINT_CLASSES) == set(JOINT_KINDS) == set(KINDS)


@pytest.mark.parametrize("parent", ["body", "world"])
@pytest.mark.parametrize("kind", KINDS)
def test_residual_and_stiffness_match_finite_differences(system, kind, parent):
    joint = _joint(system, kind if parent == "body" else f"{kind}_world")
    assert type(joint) is JOINT_CLASSES[kind]
    rng = np.random.default_rng(zlib.crc32(f"{kind}/{parent}".encode()))
    blocks = [b for b in joint.blocks if b >= 0]
    worst = np.zeros(2)
    for _ in range(SAMPLES):
        conf = _rest_configuration(system)
        _place(joint, conf, rng, coordinate=0.0 if (kind, parent) == ("prismatic", "body") else None)
        k_err = _stiffness_error(joint.residual_and_stiffness, blocks, conf, _rigid_of(system))
        _violate(conf, (joint.A, joint.B), rng)
        f_err = _residual_error(_rows_of(joint), joint.residual_and_stiffness, blocks, conf, _rigid_of(system))
        worst = np.maximum(worst, (f_err, k_err))
    print(f"{kind} ({parent}): residual {worst[0]:.2g}, stiffness {worst[1]:.2g}")
    assert worst[0] < TOL and worst[1] < TOL


@pytest.mark.xfail(strict=True, reason="the prismatic row across the axis takes the lever of the parent's anchor "
                   "p_A, not of the child's anchor p_B = p_A + s a: off by s [a]x on the parent's rotation, so "
                   "residual and stiffness are inconsistent (and angular momentum is not kept) once s != 0")
def test_prismatic_rows_away_from_zero_slide(system):
    """(With the world as parent there is no parent rotation to miss: checked above at random slides.)"""
    joint = _joint(system, "prismatic")
    rng = np.random.default_rng(5)
    conf = _rest_configuration(system)
    _place(joint, conf, rng, coordinate=0.04)
    blocks = [b for b in joint.blocks if b >= 0]
    k_err = _stiffness_error(joint.residual_and_stiffness, blocks, conf, _rigid_of(system))
    _violate(conf, (joint.A, joint.B), rng)
    f_err = _residual_error(_rows_of(joint), joint.residual_and_stiffness, blocks, conf, _rigid_of(system))
    assert max(f_err, k_err) < TOL, (f_err, k_err)


def _mimic_rows(mimic):
    """The mimic coupling's rows at a configuration (both coordinates read from the poses)."""
    def rows_at(conf):
        _, s, j = mimic.follower.coordinate(mimic.follower.geometry(conf), 0.0)
        _, s_leader, j_leader = mimic.leader.coordinate(mimic.leader.geometry(conf), 0.0)
        return mimic.rows(s, j, s_leader, j_leader)
    return rows_at


@pytest.mark.parametrize("kind", ["hinge", "prismatic"])
def test_mimic_coupling_residual_and_stiffness_match_finite_differences(system, kind):
    mimic = next(m for m in system.mimics if m.follower.name == f"m{kind}_follow")
    assert isinstance(mimic, MimicCoupling) and mimic.leader.name == f"m{kind}_lead"
    rows_at = _mimic_rows(mimic)
    sums_at = lambda conf: residual_and_stiffness(mimic.blocks, rows_at(conf))
    blocks = list(dict.fromkeys(b for b in mimic.blocks if b >= 0))     # the parent's blocks appear twice
    rng = np.random.default_rng(11 if kind == "hinge" else 12)
    worst = np.zeros(2)
    for _ in range(SAMPLES):
        conf = _rest_configuration(system)
        _place(mimic.leader, conf, rng)
        s_leader = mimic.leader.coordinate(mimic.leader.geometry(conf), 0.0)[1]
        _place(mimic.follower, conf, rng, coordinate=mimic.multiplier * s_leader + mimic.offset)
        assert abs(rows_at(conf)[0].e[0]) < 1e-12          # on the coupling's manifold
        k_err = _stiffness_error(sums_at, blocks, conf, _rigid_of(system))
        _violate(conf, (mimic.leader.A, mimic.leader.B, mimic.follower.B), rng)
        f_err = _residual_error(rows_at, sums_at, blocks, conf, _rigid_of(system))
        worst = np.maximum(worst, (f_err, k_err))
    print(f"mimic {kind}: residual {worst[0]:.2g}, stiffness {worst[1]:.2g}")
    assert worst[0] < TOL and worst[1] < TOL


@pytest.mark.parametrize("integrator", ["midpoint", "euler"])
def test_limit_rows_engaged_and_free(system, integrator):
    """Free (``s + dt ṡ`` inside the limits): no terms. Engaged: a damper whose impulse along the
    coordinate, ``a_kb c (ṡ* − ṡ̂)`` with ``ṡ̂ = j v̂``, is what the rows apply (b − A v̂ = jᵀ times it)
    and whose tangent is A's ``a_kb c jᵀ j`` (central differences in v̂); at ``ṡ̂ = ṡ*`` the step
    ends at rest on the limit (``ṡ_{k+1} = v_hat ṡ* + v_old ṡ = 0``) plus the 20 % recovery of any
    overshoot."""
    joint = _joint(system, "hinge")
    dt = system.model.dt
    coef = coefficients(integrator, dt)
    limit = Limit(-0.2, 0.3, joint.k_coordinate)
    rng = np.random.default_rng(13)
    conf = _rest_configuration(system)
    _place(joint, conf, rng)
    _, _, j = joint.coordinate(joint.geometry(conf), 0.0)
    blocks = joint.blocks
    seen = set()
    for s, sdot in [(0.0, 0.0), (0.29, 0.5), (0.29, 2.0), (0.35, 0.0), (-0.19, -0.5), (-0.19, -2.0), (-0.25, 1.0),
                    (0.31, -0.5), *zip(rng.uniform(-0.4, 0.4, 20), rng.uniform(-20.0, 20.0, 20))]:
        engaged = not (-0.2 <= s + dt * sdot <= 0.3)
        assert limit.engaged(s, sdot, dt) == engaged
        sums = RowSums()
        limit.add_to(sums, blocks, j, s, sdot, coef, dt)
        seen.add(engaged)
        if not engaged:
            assert not sums.matrix and not sums.vector
            continue
        f, M = _flat(sums, [b for b in blocks if b >= 0])
        jj = np.concatenate([row[0] for row, b in zip(j, blocks) if b >= 0])
        rate = limit.target_rate(s, sdot, coef, dt)
        c = limit.k * dt
        impulse = lambda v: coef.a_kb * c * (rate - jj @ v)
        v_hat = rng.standard_normal(len(jj))
        np.testing.assert_allclose(f - M @ v_hat, jj * impulse(v_hat), rtol=1e-12, atol=1e-12 * np.abs(f).max())
        d_impulse = central_jacobian(lambda v: jj * impulse(v), v_hat, 1e-6)
        assert scaled_error(-M, d_impulse) < TOL
        s_hat = rate                                           # the rate where the damper is at rest
        over = min(s + 0.2, 0.0) if s + dt * sdot < -0.2 else max(s - 0.3, 0.0)
        assert coef.v_hat * s_hat + coef.v_old * sdot == pytest.approx(-0.2 * coef.v_hat * over / dt, abs=1e-12)
    assert seen == {True, False}
