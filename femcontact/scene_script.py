"""Scene scripts: a ``.py`` file defining ``build(**params) -> femcontact.Scene``, imported by path
(``femcontact run``, ``femcontact sweep``, the benchmarks in ``tools/``)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from .errors import FemcontactError


def load_scene_module(path: str | Path):
    """Import a scene script by path; it must define ``build() -> femcontact.Scene``."""
    path = Path(path)
    if not path.is_file():
        raise FemcontactError(f"scene script {str(path)!r} not found; give the path of a .py file that defines "
                              "build() -> femcontact.Scene (examples in scenes/)")
    spec = importlib.util.spec_from_file_location(f"femcontact_scene_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise FemcontactError(f"scene script {str(path)!r} has a syntax error at line {exc.lineno}: {exc.msg}; "
                              "fix it (python -m py_compile SCENE.py shows it too)") from None
    if not callable(getattr(module, "build", None)):
        raise FemcontactError(f"scene script {str(path)!r} defines no build() function; add "
                              "'def build() -> femcontact.Scene:' that makes and returns the scene")
    return module
