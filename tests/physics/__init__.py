"""Known answers across solvers: agreement matrix, contact physics, integrators, cantilever, soak."""
