"""COND (solvers/cond/)."""
