"""Layout of COND's packed work arrays: its tables (``femcontact/layout.py``'s ``Table``, ``Rows``),
declared once here; the kernels read them through the columns' generated accessors.
"""
from ...backend import ti
from ...layout import Rows, Table

# per contact m: rotation R (rows: t1, t2, n), friction (μ1, μ2), normal bias φ̃ = −t_m (eq. 11),
# the obstacle side's world velocity, λ, the tangential bias (midpoint stick, module solver) and the
# λ whose virtual-damper compliance shift is in φ̃ and the bias (virtual.cond_compliance_shift)
CONTACT = Table("contact", float, [("frame", "m3"), ("mu", "s", 2), ("phi_tilde", "s"), ("v_world", "v3"),
                                   ("lam", "v3"), ("bias", "s", 2), ("lam_shift", "v3")])
CONTACT_NODES = Table("contact_nodes", ti.i32, [("node", "s", 2)])        # side a, side b (-1: world)
# per virtual node q: J_v = Σ_k weight_k on real node node_k (-1 unused), gain k_v (eq. 14/15); on a
# host's virtual row whether its contact left it free (state 1) or holds it (0), and on a rod's the state
# its rod's factor was made with (hosts.py)
VIRTUAL = Table("virtual", float, [("weight", "m3", 4), ("gain", "s")])
VIRTUAL_NODES = Table("virtual_nodes", ti.i32, [("node", "s", 4), ("state", "s"), ("factored", "s")])
# per unknown: its step (STEP_*) and, for a rigid pair, the partner row (-1 none); STEP_HOST: a host
# body's linear row or a virtual row solved with it, STEP_HOST_ANG the body's angular row (hosts.py)
ROW = Table("row", ti.i32, [("step", "s"), ("partner", "s")])
STEP_SCALAR, STEP_BLOCK, STEP_ROD, STEP_FEM, STEP_HOST, STEP_HOST_ANG = 0, 1, 2, 3, 4, 5
# rod block-tridiagonal factor (blocks.py): per 6x6 block j the rows of its halves (node, segment)
ROD_ROWS = Table("rod_rows", ti.i32, [("row", "s", 2)])
ROD_SLOTS = Table("rod_slots", ti.i32, [("diag", "s", 4), ("sub", "s", 4)])     # A's slots of D_j and L_j
ROD_BLOCKS = Table("rod_blocks", float, [("diag", "m6"), ("sub", "m6")])      # D_j, L_j of Ã_rod
# their offsets as module constants for kernels that pick one at run time (``off = ti.static(...)`` in a
# run-time branch would bind a Python name, not assign the kernel variable)
ROD_DIAG_OFF, ROD_SUB_OFF = ROD_BLOCKS.diag.off, ROD_BLOCKS.sub.off
ROD_FACTOR = Table("rod_factor", float, [("s_inv", "m6"), ("g", "m6"), ("y", "v6")])   # S_j⁻¹, G_j, sweep
# rows of the velocity table V: v̂ˡ, v̂ˡ⁻¹, v* / v̂**, gradient, previous gradient, b,
# rod block step Ã_rod⁻¹ g and its previous value, the FEM step W_F g (``fem_step``, iterate.py) with
# its Chebyshev direction (two buffers: a sweep reads one and writes the other) and residual, and a
# host body's right-hand side and step Δx (hosts.py)
VROWS = Rows("V", "V_PREV", "V_STAR", "G", "G_PREV", "B", "D_ROD", "D_ROD_PREV", "D_FEM", "P_FEM", "P_FEM_B",
             "R_FEM", "F_HOST", "D_HOST")
# COND's scalars (one row each): a float or an int outside [-5, 256] among a kernel's arguments makes
# quadrants marshal every argument afresh on each launch (docs/PERFORMANCE.md, issue 28), so every COND
# kernel reads them from these, written through the host view (``HostScalars``). Per iteration: α in
# (≤ 0: the previous slot's), ν, the ring slot (advanced by cond_iterate itself); per solve: u, ω, the FEM
# interval [a, b] and scale c, the Gershgorin cap of W (``cond_start``), the impulse scale and the last α
# (``cond_finish``), the virtual gains (``cond_gains``), dt, the default restitution, the recovery and its
# speed cap (``cond_targets``), W's spectral scale (``cond_scale_rows``); the real row count n0, all virtual
# nodes nv (the ContactSet's nv_set, then COND's own), the contacts nc, rods, restitution-table rows,
# midpoint (0/1), warm start (0/1).
ITER_F = Table("iter_f", float, [("alpha", "s"), ("nu", "s"), ("u", "s"), ("omega", "s"), ("fem_a", "s"),
                                 ("fem_b", "s"), ("fem_c", "s"), ("wcap", "s"), ("impulse_scale", "s"),
                                 ("alpha_end", "s"), ("gain", "s"), ("rigid_gain", "s"), ("dt", "s"),
                                 ("restitution", "s"), ("recovery", "s"), ("vrec_max", "s"), ("w_scale", "s")])
ITER_I = Table("iter_i", ti.i32, [("slot", "s"), ("n0", "s"), ("nv", "s"), ("nc", "s"), ("nrods", "s"),
                                  ("nv_set", "s"), ("n_rest", "s"), ("midpoint", "s"), ("warm", "s")])
# which row kinds a model has besides scalar rows (a compile-time template of cond_iterate and cond_gains),
# and whether its rigid bodies are solved with their virtual nodes (option host_solve, hosts.py)
HAS_BLOCKS, HAS_RODS, HAS_HOSTS = 1, 2, 4
