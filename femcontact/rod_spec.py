"""Old home of the rod spec; it lives in ``femcontact.spec.rod`` now."""
from .spec.rod import (SHEAR_COEFFICIENT, RodSpec, darboux, make_rod, parallel_transport_frames, quat_conj,
                       quat_mul)

__all__ = ["SHEAR_COEFFICIENT", "RodSpec", "darboux", "make_rod", "parallel_transport_frames", "quat_conj",
           "quat_mul"]
