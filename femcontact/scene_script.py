"""Scene scripts: a ``.py`` file defining ``build(**params) -> femcontact.Scene``, imported by path
(``femcontact run``, ``femcontact sweep``, the benchmarks in ``tools/``)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from .errors import FemcontactError

MESH_SUFFIXES = (".vtu", ".vtk", ".msh", ".xdmf", ".obj", ".stl", ".ply", ".off", ".mesh", ".inp")


def load_scene_module(path: str | Path):
    """Import a scene script by path; it must define ``build() -> femcontact.Scene``."""
    path = Path(path)
    if not path.is_file():
        raise FemcontactError(f"scene script {str(path)!r} not found; give the path of a .py file that defines "
                              "build() -> femcontact.Scene (examples in scenes/)")
    if path.suffix != ".py":
        hint = (f"; a mesh goes into a scene with femcontact.meshes.load({str(path)!r}) inside build()"
                if path.suffix.lower() in MESH_SUFFIXES else "")
        raise FemcontactError(f"scene script {str(path)!r} is not a .py file; give a Python script that defines "
                              f"build() -> femcontact.Scene (examples in scenes/){hint}")
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


def scene_hash(path: str | Path, params: dict | None = None) -> str:
    """sha256 of a scene script's text and the ``build()`` parameters given to it: stored with a
    checkpointed run (``OUT/run.json``, the checkpoint) so ``--resume`` refuses a changed scene."""
    import hashlib
    import json

    h = hashlib.sha256(Path(path).read_bytes())
    h.update(json.dumps(params or {}, sort_keys=True, default=repr).encode())
    return h.hexdigest()
