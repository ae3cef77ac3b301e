"""The step's linear solvers (solvers/linear.py): block-Jacobi PCG against the direct factorization."""
import numpy as np
import pytest

import femcontact as fc
from femcontact import backend
from femcontact.solvers.linear import BlockJacobiPCG, DirectSolver


@pytest.fixture(scope="module")
def cube_system():
    scene = fc.Scene(dt=1e-2)
    scene.add_fem_body(fc.meshes.box((0.1, 0.1, 0.1), 4, center=(0, 0, 0.05)), fc.Material(1e6, 0.3, 1000.0),
                       name="cube")
    sim = fc.Simulator(scene)
    sim.assemble()
    return sim


@pytest.mark.parametrize("check_every", [1, 5])
def test_pcg_matches_the_direct_solve(cube_system, check_every):
    """PCG keeps its scalars on the device and is read every check_every iterations; the kernels stop
    on their own at convergence, so reading late changes neither the answer nor the count."""
    sim, n = cube_system, cube_system.model.n_nodes
    x_ref = backend.vec3_array(n)
    DirectSolver(n).solve(sim.A, sim.b, x_ref)
    counts = []
    for k in (1, check_every):
        pcg = BlockJacobiPCG(n, tol=1e-10)
        pcg.check_every = k
        x = backend.vec3_array(n)
        st = pcg.solve(sim.A, sim.b, x)
        assert st.converged and st.residual <= 1e-10, st
        np.testing.assert_allclose(x.to_numpy(), x_ref.to_numpy(), atol=1e-8 * np.abs(x_ref.to_numpy()).max())
        counts.append(st.iterations)
    assert counts[0] == counts[1] > 1, counts


def test_pcg_zero_right_hand_side_and_iteration_cap(cube_system):
    sim, n = cube_system, cube_system.model.n_nodes
    x = backend.vec3_array(n, np.ones((n, 3)))
    st = BlockJacobiPCG(n).solve(sim.A, backend.vec3_array(n), x)
    assert st.iterations == 0 and st.converged and not np.any(x.to_numpy())
    st = BlockJacobiPCG(n, tol=1e-12, max_iter=3).solve(sim.A, sim.b, backend.vec3_array(n))
    assert st.iterations == 3 and not st.converged
