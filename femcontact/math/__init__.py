"""Small math below every other layer: kernel small matrices and rotations (``smallmat``, ``ti.func``),
quaternions on the host (``quaternion``, numpy)."""
