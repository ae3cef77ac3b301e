"""Ready-made assemblies of bodies, joints and drives, built through a ``Scene``: ``ParallelGripper``."""
from .gripper import ParallelGripper

__all__ = ["ParallelGripper"]
