"""Names and units of the point and cell arrays the simulator writes (``Simulator.frame_pieces``), for
colour-bar titles and plot labels.
"""
from __future__ import annotations

__all__ = ["FIELD_UNITS", "field_label"]

# array name -> unit ("" dimensionless; a non-unit text is shown as it is)
FIELD_UNITS: dict[str, str] = {
    "displacement": "m", "velocity": "m/s", "von_mises": "Pa",                     # FEM bodies
    "radius": "m", "stretch": "", "shear": "", "bend": "1/m", "twist": "rad/m",    # rods
    "normal": "", "impulse": "N s", "force": "N", "gap": "m",                      # contacts
    "state": "0 open, 1 stick, 2 slip", "body_a": "body index", "body_b": "body index",
}


def field_label(name: str, vector: bool = False) -> str:
    """``"von_mises (Pa)"``, ``"velocity magnitude (m/s)"`` for a vector shown by its magnitude (VTK's
    fonts have no ``|``); unknown arrays keep their bare name, dimensionless ones say ``(-)``."""
    shown = f"{name} magnitude" if vector else name
    if name not in FIELD_UNITS:
        return shown
    return f"{shown} ({FIELD_UNITS[name] or '-'})"
