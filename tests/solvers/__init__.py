"""The contact solvers (solvers/): the Newton path, NCP-PGS, incp, the linear solvers."""
