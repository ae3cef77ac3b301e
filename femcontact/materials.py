"""Old home of ``Material``; it lives in ``femcontact.spec.material`` now."""
from .spec.material import Material

__all__ = ["Material"]
