"""The parts of a URDF that ``load_robot`` reads, as plain data, cached by the file's content.

``read_urdf(path)`` parses the file with yourdfpy once and keeps what ``load_robot`` uses (the robot's
name; links: name, inertial, visuals, collisions; joints: name, type, parent, child, origin, axis,
limit, mimic) in the geometry cache (``femcontact.geometry_cache``), keyed by the file's bytes and the
versions of this code and yourdfpy. A later process reads that entry and imports neither yourdfpy nor
trimesh (~0.8 s of start-up). The result mirrors yourdfpy's attribute names (``link.inertial.mass``,
``joint.limit.lower``, ``collision.geometry.mesh.filename``...) as ``SimpleNamespace`` objects, 4x4
origins and other vectors as float arrays, absent parts as None.
"""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from .. import geometry_cache
from ..errors import ParameterError

VERSION = 1          # of the description's layout: in the cache key


def _array(a):
    return None if a is None else {"array": np.asarray(a, float).tolist()}


def _geometry(g) -> dict | None:
    if g is None:
        return None
    return {"box": None if g.box is None else {"size": _array(g.box.size)},
            "sphere": None if g.sphere is None else {"radius": float(g.sphere.radius)},
            "cylinder": None if g.cylinder is None else {"radius": float(g.cylinder.radius),
                                                          "length": float(g.cylinder.length)},
            "mesh": None if g.mesh is None else {"filename": g.mesh.filename, "scale": _array(g.mesh.scale)}}


def _pieces(items) -> list:
    return [{"origin": _array(p.origin), "geometry": _geometry(p.geometry)} for p in items]


def _number(x):
    return None if x is None else float(x)


def _describe(robot) -> dict:
    """yourdfpy's ``URDF.robot`` as JSON-ready plain data (the fields ``load_robot`` reads)."""
    links = [{"name": L.name,
              "inertial": None if L.inertial is None else {"origin": _array(L.inertial.origin),
                                                           "mass": _number(L.inertial.mass),
                                                           "inertia": _array(L.inertial.inertia)},
              "visuals": _pieces(L.visuals), "collisions": _pieces(L.collisions)} for L in robot.links]
    joints = [{"name": j.name, "type": j.type, "parent": j.parent, "child": j.child,
               "origin": _array(j.origin), "axis": _array(j.axis),
               "limit": None if j.limit is None else {k: _number(getattr(j.limit, k))
                                                      for k in ("effort", "velocity", "lower", "upper")},
               "mimic": None if j.mimic is None else {"joint": j.mimic.joint, "multiplier": _number(j.mimic.multiplier),
                                                      "offset": _number(j.mimic.offset)}} for j in robot.joints]
    return {"name": robot.name, "links": links, "joints": joints}


def _plain(obj):
    """JSON data -> SimpleNamespace tree, ``{"array": ...}`` -> float ndarray."""
    if isinstance(obj, dict):
        if set(obj) == {"array"}:
            return np.asarray(obj["array"], float)
        return SimpleNamespace(**{k: _plain(v) for k, v in obj.items()})
    if isinstance(obj, list):
        return [_plain(v) for v in obj]
    return obj


def _parse(path: Path) -> dict:
    try:
        import yourdfpy
    except ImportError:
        raise ParameterError("URDF robots need yourdfpy: pip install 'femcontact[robots]'") from None
    try:
        urdf = yourdfpy.URDF.load(str(path), build_scene_graph=False, build_collision_scene_graph=False,
                                  load_meshes=False, load_collision_meshes=False)
    except Exception as exc:       # lxml and yourdfpy errors of a malformed file
        raise ParameterError(f"cannot read URDF {path}: {exc}") from None
    return _describe(urdf.robot)


def read_urdf(path: Path) -> SimpleNamespace:
    """The description of URDF file ``path`` (module docstring): from the cache, else parsed and cached."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ParameterError(f"cannot read URDF {path}: {exc}") from None
    key = geometry_cache.content_key(VERSION, geometry_cache.library_version("yourdfpy"), data)
    entry = geometry_cache.cached("urdf", key, ["json"], lambda: {"json": np.array(json.dumps(_parse(path)))})
    return _plain(json.loads(str(entry["json"])))
