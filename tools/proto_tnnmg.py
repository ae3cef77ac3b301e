"""Host prototype (numpy/scipy) of a truncated nonsmooth multigrid correction for COND's FEM rows
(issue 32 item 4): measures iterations to e_m ≤ tol per step on the mat against COND's own count.

    python tools/proto_tnnmg.py [--scene mat_drag|cube_drop] [--sizes 12 26] [--steps 3] [--tol 1e-4]
        [--variants smoother direct twolevel twolevel_sa vcycle vcycle_sa fine2 fine4 fine8]
        [--rotations] [--spacing shortest|median|axes] [--box F | --box Fx Fy Fz] [--cost]

Per measured step (after the Table I settle under Lagged) the step problem is captured from COND's
solve (A, b, prescribed rows, contact frames, μ, targets, COND's scalar W) and iterated on the host
from the same warm start:

    smoother   v* = v − W(Av − b); λ = ProjectFC(−y(v*)/γ); v** = v* + W Jᵀλ        (COND Alg. 1-2)
    truncation per contact node: stick → all 3 directions, slide → the normal, open → none
    correction c = T P_1 (V-cycle on P_1ᵀ T A T P_1) P_1ᵀ T r,  r = b + Jᵀλ − A v**
    line search α = cᵀr / cᵀAc on the quadratic with λ frozen; v ← v** + α c

(femcontact/solvers/cond/multigrid.py holds the hierarchy and the cycle.) e_m is SAP eq. 32's
(``HostContactProblem.momentum_error``) of (v**, λ) after each smoother.
"""
import argparse
import time

import numpy as np

import femcontact as fc
from femcontact.bench.cases import PRESETS
from femcontact.solvers.cond import multigrid as mg
from femcontact.solvers.host_problem import HostContactProblem


class Capture:
    """Wraps COND: runs its solve, then the host prototype on the same step from the same warm start."""

    def __init__(self, inner, variants, tol, max_cycles, hierarchy, cost=False):
        self.inner, self.name, self.cost = inner, inner.name, cost
        self.variants, self.tol, self.max_cycles, self.hier = variants, tol, max_cycles, hierarchy
        self.rows = []

    def solve(self, problem):
        hp = HostContactProblem(problem, ("impulse",))
        v0 = fc.backend.read(problem.v_hat, hp.n).astype(np.float64).copy()
        t0 = time.perf_counter()
        st = self.inner.solve(problem)
        ms = 1e3 * (time.perf_counter() - t0)
        row = {"cond": st.iterations, "cond_em": st.extra.get("momentum_error"), "cond_ms": ms}
        if hp.c:
            step = mg.HostStep.from_cond(self.inner, hp, v0)
            for name, opts in self.variants.items():
                res = mg.solve(step, self.hier, tol=self.tol, max_cycles=self.max_cycles, **opts)
                row[name] = res
                if self.cost:
                    res["ms"] = correction_ms(step, self.hier, opts)
        self.rows.append(row)
        return st

    def memory(self):
        return self.inner.memory()

    def restore(self, m):
        self.inner.restore(m)


def correction_ms(step, hier, opts) -> tuple[float, float]:
    """(one ``A @ x``, one correction after one smoother step) in ms, minima of 50 and 5 runs."""
    cyc = mg.Cycle(step, hier, opts.get("coarse") or "exact", opts.get("smooth_p", False), 1,
                   opts.get("line_search", True), fine_sweeps=opts.get("fine_sweeps", 0))
    v, lam = cyc.smoother(step.v0.ravel().copy())
    st = cyc.states(lam)
    x = np.ones(step.A.shape[0])

    def least(f, k):
        ts = []
        for _ in range(k):
            t0 = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t0)
        return 1e3 * min(ts)

    return least(lambda: step.A @ x, 50), least(lambda: cyc.correction(v, lam, st), 5)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scene", default="mat_drag", choices=["mat_drag", "cube_drop"])
    ap.add_argument("--sizes", type=int, nargs="+", default=[12])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--max-cycles", type=int, default=300)
    ap.add_argument("--settle", type=float, default=None)
    ap.add_argument("--variants", nargs="+", default=["smoother", "twolevel", "vcycle"])
    ap.add_argument("--rotations", action="store_true")
    ap.add_argument("--cost", action="store_true", help="time one A @ x and one correction (host, scipy)")
    ap.add_argument("--box", type=float, nargs="+", default=[2.0])
    ap.add_argument("--spacing", default="shortest", choices=["shortest", "median", "axes"])
    args = ap.parse_args()
    variants = {v: mg.VARIANTS[v] for v in args.variants}
    build, _, settle, _ = PRESETS[args.scene]
    settle = {"cube_drop": 0.1}.get(args.scene, settle)       # the cube: landed (tools/bench_cond.py)
    for size in args.sizes:
        scene = build(size)
        sim = fc.Simulator(scene)
        own = sim.contact_solver
        sim.contact_solver = fc.solvers.make_contact_solver("lagged", sim.model, {})
        sim.run(duration=settle if args.settle is None else args.settle)
        sim.contact_solver = own
        sim.step()
        hier = mg.Hierarchy.from_model(sim.model, rotations=args.rotations, box=np.array(args.box) if len(args.box) > 1 else args.box[0], spacing=args.spacing)
        cap = Capture(own, variants, args.tol, args.max_cycles, hier, args.cost)
        sim.contact_solver = cap
        sim.run(steps=args.steps)
        print(f"{args.scene} {size}: {sim.model.n_dofs} DOF, levels {[lv for lv in hier.sizes()]}")
        for k, r in enumerate(cap.rows):
            parts = [f"COND {r['cond']} its (e_m {r['cond_em']:.1e})"]
            for name in variants:
                if name in r:
                    x = r[name]
                    parts.append(f"{name} {x['cycles']} cyc (e_m {x['e_m']:.1e}, κ_eff {x['kappa_eff']:.0f}, "
                                 f"mv {x['matvecs']:.1f}/cyc, "
                                 f"α {x['alpha']:.2f}, stick/slide/open {x['states']}"
                                 + (f", A@x {x['ms'][0]:.3f} ms, correction {x['ms'][1]:.1f} ms" if "ms" in x else "")
                                 + ")")
            print(f"  step {k}: " + "; ".join(parts), flush=True)


if __name__ == "__main__":
    main()
