"""Element kernels of each body type (forces, stiffness blocks, Jacobians)."""
