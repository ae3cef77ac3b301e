"""Material parameters, validated when created."""
from __future__ import annotations

from dataclasses import dataclass

from .validation import is_finite_number, require


@dataclass(frozen=True)
class Material:
    """Isotropic linear-elastic material with Rayleigh damping.

    youngs_modulus: E in Pa (> 0). poisson_ratio: nu in (-1, 0.5). density: kg/m^3 (> 0).
    rayleigh_alpha: mass-proportional damping in 1/s (>= 0).
    rayleigh_beta: stiffness-proportional damping in s (>= 0). D = alpha M + beta K.
    """

    youngs_modulus: float
    poisson_ratio: float
    density: float
    rayleigh_alpha: float = 0.0
    rayleigh_beta: float = 0.0

    def __post_init__(self) -> None:
        for name in ("youngs_modulus", "poisson_ratio", "density", "rayleigh_alpha", "rayleigh_beta"):
            value = getattr(self, name)
            require(is_finite_number(value),
                     f"Material.{name} must be a finite number, got {value!r}")
            object.__setattr__(self, name, float(value))   # numpy scalars too; stored as float
        require(self.youngs_modulus > 0, f"Material.youngs_modulus must be > 0 Pa, got {self.youngs_modulus}")
        require(self.poisson_ratio < 0.5,
                 f"Material.poisson_ratio must lie in (-1, 0.5), got {self.poisson_ratio} "
                 "(0.5 is incompressible, which linear FEM cannot represent: use e.g. 0.49 for rubber)")
        require(self.poisson_ratio > -1.0,
                 f"Material.poisson_ratio must lie in (-1, 0.5), got {self.poisson_ratio} "
                 "(-1 and below give a negative bulk or shear modulus)")
        require(self.density > 0, f"Material.density must be > 0 kg/m^3, got {self.density}")
        require(self.rayleigh_alpha >= 0, f"Material.rayleigh_alpha must be >= 0, got {self.rayleigh_alpha}")
        require(self.rayleigh_beta >= 0, f"Material.rayleigh_beta must be >= 0, got {self.rayleigh_beta}")

    @property
    def lame(self) -> tuple[float, float]:
        """(mu, lambda) Lamé parameters in Pa."""
        e, nu = self.youngs_modulus, self.poisson_ratio
        return e / (2 * (1 + nu)), e * nu / ((1 + nu) * (1 - 2 * nu))
