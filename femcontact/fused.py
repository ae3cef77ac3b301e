"""Kernels that run one step's launches of two packages as one launch (issue 28: on a 2-core CPU a launch
inside a step costs 20-60 µs, most of it the launch itself). Each runs the packages' own ``ti.func``
bodies in order, with the same arithmetic as their separate kernels.

(No ``from __future__ import annotations`` here: Taichi reads the annotations.)
"""
from .backend import ti
from .assembly.integrator import advance_blocks
from .contact.anchors import remember_step


@ti.kernel
def advance_and_remember(x: ti.types.ndarray(), v: ti.types.ndarray(), fixed: ti.types.ndarray(),
                         v_end: ti.types.ndarray(), rot_block: ti.types.ndarray(), quat: ti.types.ndarray(),
                         n_rot: ti.i32, C: ti.types.ndarray(), speed2: ti.types.ndarray(),
                         cf: ti.types.ndarray(), ci: ti.types.ndarray(), vn_node: ti.types.ndarray(),
                         vn_weight: ti.types.ndarray(), v_hat: ti.types.ndarray(), slip_now: ti.types.ndarray(),
                         mf: ti.types.ndarray(), mi: ti.types.ndarray(), head: ti.types.ndarray(),
                         af: ti.types.ndarray(), mn: ti.types.ndarray()):
    """``assembly.integrator.advance_all`` then the stiction anchors' update (``contact.anchors.remember_step``;
    its arguments last, in ``anchors_update``'s order). Neither reads what the other writes: the update
    needs v̂ and the contacts, not the advanced positions or velocities."""
    advance_blocks(x, v, v_hat, fixed, v_end, rot_block, quat, n_rot, C, speed2)
    remember_step(cf, ci, vn_node, vn_weight, v_hat, slip_now, mf, mi, head, af, mn)
