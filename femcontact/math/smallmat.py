"""Small-matrix products and inverses for kernels, written with runtime loops to keep Taichi's front end cheap.

Taichi 1.7 implements ``A @ B``, ``.inverse()`` and ``.transpose()`` as Python-level functions whose
``ti.static`` loops its front end unrolls (27 multiply-adds of AST work for one 3x3 product) on every run,
even when the offline cache holds the compiled kernel. These ``ti.func``s do the same arithmetic, in the
same order, in runtime loops over compile-time bounds: a few AST nodes each, and LLVM unrolls them
again, so the compiled code and the results are the same (a 10-fold 3x3 product: front end 3.1 s -> 0.36 s,
bit-identical answers). Use them in kernels that are compiled on every start-up. Also the rotation
matrix of a quaternion (``quat_matrix``) and the cross-product matrix (``skew``), the kernel twins of
``quaternion.py``.
"""
from ..backend import ti


@ti.func
def mm(A, B):
    """A @ B (matrix-matrix)."""
    C = ti.Matrix.zero(float, ti.static(A.get_shape()[0]), ti.static(B.get_shape()[1]))
    for i in range(ti.static(A.get_shape()[0])):
        for j in range(ti.static(B.get_shape()[1])):
            s = 0.0
            for k in range(ti.static(A.get_shape()[1])):
                s += A[i, k] * B[k, j]
            C[i, j] = s
    return C


@ti.func
def mmT(A, B):
    """A @ B.T."""
    C = ti.Matrix.zero(float, ti.static(A.get_shape()[0]), ti.static(B.get_shape()[0]))
    for i in range(ti.static(A.get_shape()[0])):
        for j in range(ti.static(B.get_shape()[0])):
            s = 0.0
            for k in range(ti.static(A.get_shape()[1])):
                s += A[i, k] * B[j, k]
            C[i, j] = s
    return C


@ti.func
def mTm(A, B):
    """A.T @ B."""
    C = ti.Matrix.zero(float, ti.static(A.get_shape()[1]), ti.static(B.get_shape()[1]))
    for i in range(ti.static(A.get_shape()[1])):
        for j in range(ti.static(B.get_shape()[1])):
            s = 0.0
            for k in range(ti.static(A.get_shape()[0])):
                s += A[k, i] * B[k, j]
            C[i, j] = s
    return C


@ti.func
def mv(A, x):
    """A @ x (matrix-vector)."""
    y = ti.Vector.zero(float, ti.static(A.get_shape()[0]))
    for i in range(ti.static(A.get_shape()[0])):
        s = 0.0
        for k in range(ti.static(A.get_shape()[1])):
            s += A[i, k] * x[k]
        y[i] = s
    return y


@ti.func
def tr(A):
    """A.T."""
    C = ti.Matrix.zero(float, ti.static(A.get_shape()[1]), ti.static(A.get_shape()[0]))
    for i in range(ti.static(A.get_shape()[1])):
        for j in range(ti.static(A.get_shape()[0])):
            C[i, j] = A[j, i]
    return C


@ti.func
def inv3(A):
    """Inverse of a 3x3 matrix by cofactors (Taichi's formula and operation order)."""
    det = A[0, 0] * (A[1, 1] * A[2, 2] - A[2, 1] * A[1, 2]) \
        - A[1, 0] * (A[0, 1] * A[2, 2] - A[2, 1] * A[0, 2]) \
        + A[2, 0] * (A[0, 1] * A[1, 2] - A[1, 1] * A[0, 2])
    inv_det = 1.0 / det
    C = ti.Matrix.zero(float, 3, 3)
    for j in range(3):
        for i in range(3):
            i1, i2, j1, j2 = (i + 1) % 3, (i + 2) % 3, (j + 1) % 3, (j + 2) % 3
            C[j, i] = inv_det * (A[i1, j1] * A[i2, j2] - A[i2, j1] * A[i1, j2])
    return C


@ti.func
def mTv(A, x):
    """A.T @ x (transposed matrix-vector)."""
    y = ti.Vector.zero(float, ti.static(A.get_shape()[1]))
    for i in range(ti.static(A.get_shape()[1])):
        s = 0.0
        for k in range(ti.static(A.get_shape()[0])):
            s += A[k, i] * x[k]
        y[i] = s
    return y


@ti.func
def quat_matrix(q):
    """Rotation matrix of a (w, x, y, z) quaternion (normalized here)."""
    qn = q.normalized()
    w, x, y, z = qn[0], qn[1], qn[2], qn[3]
    return ti.Matrix([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                      [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                      [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


@ti.func
def skew(a):
    return ti.Matrix([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])
