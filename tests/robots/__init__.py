"""URDF robots (robots/)."""
