"""Global sums over the velocity rows that a GPU does not serialize.

A kernel that adds every row's term straight into one kernel-scope sum makes one atomic add per row
on the same few addresses; on an H100 those serialize at ~20 ns each, and COND's step norms and
Anderson's Gram products cost 7.6 and 33 ms per iteration at 98k DOF, 94% of the iteration
(docs/GPU.md). Instead the rows are split into ``partial_sums(n)`` interleaved groups: a thread sums
its group's rows (rows b, b + P, b + 2P, …: neighbouring threads read neighbouring rows) and adds that
one partial into the total, so a sum costs ~2√n atomic adds and ~√n sequential rows per thread.
"""
from ...backend import ti


@ti.func
def partial_sums(n):
    """How many partial sums P a reduction over ``n`` rows uses: ⌈√n⌉ (at least 1)."""
    p = ti.cast(ti.sqrt(ti.cast(n, ti.f32)), ti.i32)
    if p * p < n:
        p += 1
    return ti.max(p, 1)


@ti.func
def group_size(n, p, b):
    """How many of the rows b, b + p, b + 2p, … lie below ``n``."""
    return (n - b + p - 1) // p
