"""Offscreen rendering of a ``.pvd`` series (from :class:`femcontact.io.vtk.SeriesWriter`) with PyVista.

``render_series(pvd, "out.png")`` draws one frame (the last by default);
``render_series(pvd, "out.gif")`` / ``"out.mp4"`` draws a movie over the frames.

How pieces are drawn (chosen from the cells of each piece):

- volume cells (an FEM body): opaque, with edges, coloured by ``scalars`` if it has them;
- only vertex cells / no cells (contact points, point clouds): glyph spheres, sized to the bodies
  each contact touches (``body_a``/``body_b``: a rod's radius, 4 % of a body's diagonal);
- only line cells (rods, cables): tubes, radius from the ``radius`` point data when present;
- surface cells of an obstacle (marked by the point array ``obstacle``: the ground's patch, a
  drum): semi-transparent;
- other surface cells (rigid bodies, robot links): opaque, shaded.

The camera is fixed for the whole movie: z up, framing over all frames the ``focus`` body, or by
default the bodies that are not robots (a robot's reach would shrink the object it holds to a few
pixels; the robots when there is nothing else) and the obstacles no larger than them (a half-space's
patch is as large as the scene and would shrink the bodies to dots). ``hide`` leaves pieces out
(``contacts``, ``obstacles``, a piece or robot name). The colour bar's title gives the array's name
and unit (``io/fields.py``).

Headless machines: no display is needed. Before the first render this module checks,
in a child process (a failing OpenGL start can crash the process), which offscreen
path works: the normal window (when ``DISPLAY`` is set), EGL, OSMesa, then ``Xvfb``,
and uses the first that does. On Debian/Ubuntu EGL needs
``apt-get install libegl1 libgl1 libegl-mesa0 libgl1-mesa-dri`` (software llvmpipe, no GPU).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..errors import FemcontactError, ParameterError
from .fields import field_label
from .vtk import pvd_frames

__all__ = ["render_series", "add_render_command", "ensure_offscreen", "RenderError"]

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff"}
MOVIE_SUFFIXES = {".gif", ".mp4", ".mov", ".avi", ".mkv", ".webm"}
_BODY_COLORS = ["#6f9fd8", "#e39b5b", "#7dbf7a", "#c48bd1", "#d8c86f", "#6fcfc8"]
_INSTALL_HINT = (
    "Offscreen rendering needs an OpenGL implementation. On Debian/Ubuntu install the EGL "
    "software renderer: `apt-get install libegl1 libgl1 libegl-mesa0 libgl1-mesa-dri` "
    "(or `libosmesa6`, or `xvfb`); on a desktop, run where a display is available."
)


class RenderError(FemcontactError, RuntimeError):
    """Rendering is impossible here (no working OpenGL) or a movie writer is missing."""


# ---------------------------------------------------------------------------
# offscreen backend selection
# ---------------------------------------------------------------------------

_PROBE = r"""
import sys
import pyvista as pv
p = pv.Plotter(off_screen=True, window_size=(64, 48))
p.add_mesh(pv.Sphere(), color="red")
img = p.screenshot(return_img=True)
p.close()
ok = img is not None and img.reshape(-1, img.shape[-1]).std(axis=0).max() > 1.0
print("FEMCONTACT_RENDER_OK" if ok else "FEMCONTACT_RENDER_BLANK")
"""

_offscreen_ok: str | None = None
_xvfb_proc: subprocess.Popen | None = None


def _probe(env: dict[str, str]) -> tuple[bool, str]:
    try:
        r = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True,
                           text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return False, "timed out"
    if "FEMCONTACT_RENDER_OK" in r.stdout:
        return True, ""
    text = re.sub(r"\x1b\[[0-9;]*m", "", r.stderr or r.stdout)
    tail = [ln.strip() for ln in text.strip().splitlines()[-2:]]
    return False, f"exit code {r.returncode}: " + " | ".join(tail)


def _start_xvfb() -> str | None:
    global _xvfb_proc
    exe = shutil.which("Xvfb")
    if exe is None:
        return None
    for n in range(99, 120):
        if Path(f"/tmp/.X11-unix/X{n}").exists() or Path(f"/tmp/.X{n}-lock").exists():
            continue
        proc = subprocess.Popen([exe, f":{n}", "-screen", "0", "1920x1080x24", "-nolisten", "tcp"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import time

        for _ in range(50):
            if Path(f"/tmp/.X11-unix/X{n}").exists():
                _xvfb_proc = proc
                return f":{n}"
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        proc.terminate()
    return None


def ensure_offscreen() -> str:
    """Make offscreen rendering work in this process or raise :class:`RenderError` saying what to install.

    Returns the name of the path chosen ("display", "egl", "osmesa", "xvfb" or "user").
    Checked once per process, in child processes, because a missing OpenGL library can
    crash VTK instead of raising.
    """
    global _offscreen_ok
    if _offscreen_ok is not None:
        return _offscreen_ok
    import pyvista as pv

    pv.OFF_SCREEN = True
    if sys.platform != "linux" or os.environ.get("VTK_DEFAULT_OPENGL_WINDOW"):
        _offscreen_ok = "user" if os.environ.get("VTK_DEFAULT_OPENGL_WINDOW") else "display"
        return _offscreen_ok
    base = dict(os.environ)
    candidates: list[tuple[str, dict[str, str]]] = []
    if base.get("DISPLAY"):
        candidates.append(("display", {}))
    candidates += [("egl", {"VTK_DEFAULT_OPENGL_WINDOW": "vtkEGLRenderWindow"}),
                   ("osmesa", {"VTK_DEFAULT_OPENGL_WINDOW": "vtkOSOpenGLRenderWindow"})]
    reasons = []
    for name, extra in candidates:
        ok, why = _probe({**base, **extra})
        if ok:
            os.environ.update(extra)
            _offscreen_ok = name
            return name
        reasons.append(f"{name}: {why}")
    display = _start_xvfb()
    if display:
        ok, why = _probe({**base, "DISPLAY": display})
        if ok:
            os.environ["DISPLAY"] = display
            _offscreen_ok = "xvfb"
            return "xvfb"
        reasons.append(f"xvfb: {why}")
    else:
        reasons.append("xvfb: no Xvfb executable")
    raise RenderError(_INSTALL_HINT + "\nTried: " + "; ".join(reasons))


# ---------------------------------------------------------------------------
# scene
# ---------------------------------------------------------------------------

def _kind(ds) -> str:
    """'volume', 'surface', 'lines' or 'points' from the highest cell dimension of ``ds``."""
    if ds.n_cells == 0:
        return "points"
    if ds.IsA("vtkPolyData"):
        if ds.GetNumberOfPolys() or ds.GetNumberOfStrips():
            return "surface"
        return "lines" if ds.GetNumberOfLines() else "points"
    try:  # VTK >= 9.6
        from vtkmodules.vtkCommonDataModel import vtkCellTypeUtilities as _ct
    except ImportError:  # pragma: no cover - older VTK
        from vtkmodules.vtkCommonDataModel import vtkCellTypes as _ct

    dims = {_ct.GetDimension(int(t)) for t in np.unique(np.asarray(ds.celltypes))}
    top = max(dims) if dims else 0
    return {3: "volume", 2: "surface", 1: "lines"}.get(top, "points")


def _is_obstacle(ds) -> bool:
    """An obstacle's piece: a surface marked by the point array ``obstacle`` (the simulator's output)."""
    return _kind(ds) == "surface" and "obstacle" in ds.point_data


def _scalar_values(ds, name: str) -> np.ndarray | None:
    for data in (ds.point_data, ds.cell_data):
        if name in data:
            a = np.asarray(data[name], dtype=float)
            return np.linalg.norm(a.reshape(len(a), -1), axis=1) if a.ndim > 1 else a
    return None


def _load(entries: list[dict[str, Any]]) -> list[tuple[dict[str, Any], Any]]:
    import pyvista as pv

    out = []
    for e in entries:
        if not e["file"].exists():
            raise FileNotFoundError(f"frame file listed in the .pvd is missing: {e['file']}")
        out.append((e, pv.read(e["file"])))
    return out


ROBOT_MARGIN = 1.6   # the default framing's growth when it leaves robots out (their fingers stay in view)
FRAMING_POINTS = 256  # points per piece and frame kept to frame the camera on
SCAN_FRAMES = 200    # frames read (spread over the series) for the framing and the colour range
FADED = 0.45         # opacity of the robots the default framing leaves out (they would hide the object)


def _sample_frames(frames: Sequence, limit: int = SCAN_FRAMES) -> list:
    """At most ``limit`` of ``frames``, spread evenly over them (the first and the last among them)."""
    if len(frames) <= limit:
        return list(frames)
    return [frames[k] for k in np.linspace(0, len(frames) - 1, limit).astype(int)]


class _Pieces:
    """What the frames hold, piece by piece: bounds over all frames, obstacles, robots (a robot's link
    pieces ``<robot>/<link>`` and its rigid bodies, from the contacts' field data ``body_robots`` or
    named ``<robot>.<link>``), and the scalar range and whether the scalar is a vector.

    ``loaded_frames``: the frames to scan, each as :func:`_load` returns it ((entry, dataset) pairs)."""

    def __init__(self, loaded_frames, scalars: str | None):
        self.bounds: dict[str, np.ndarray] = {}       # name -> (3, 2) lo/hi over the frames
        self.points: dict[str, list[np.ndarray]] = {}  # name -> up to FRAMING_POINTS of its points per frame
        self.obstacles: set[str] = set()
        self.robot_of: dict[str, str] = {}
        self.srange = [np.inf, -np.inf]
        self.vector = False
        for loaded in loaded_frames:
            for e, ds in loaded:
                name = e["name"]
                if name == "contacts" and "body_robots" in ds.field_data:
                    for body, robot in zip(ds.field_data["body_names"], ds.field_data["body_robots"]):
                        if str(robot):
                            self.robot_of[str(body)] = str(robot)
                if ds.n_points == 0:
                    continue
                b = np.asarray(ds.bounds, float).reshape(3, 2)
                old = self.bounds.get(name)
                self.bounds[name] = b if old is None else np.column_stack([np.minimum(old[:, 0], b[:, 0]),
                                                                           np.maximum(old[:, 1], b[:, 1])])
                pts = np.asarray(ds.points, float)
                extremes = pts[np.r_[pts.argmin(0), pts.argmax(0)]]          # the subsample misses none of them
                self.points.setdefault(name, []).append(np.vstack([pts[::max(1, len(pts) // FRAMING_POINTS)], extremes]))
                if _is_obstacle(ds):
                    self.obstacles.add(name)
                if scalars:
                    v = _scalar_values(ds, scalars)
                    if v is not None and v.size:
                        self.srange = [min(self.srange[0], float(np.nanmin(v))), max(self.srange[1], float(np.nanmax(v)))]
                        self.vector |= any(scalars in d and np.asarray(d[scalars]).ndim > 1
                                           for d in (ds.point_data, ds.cell_data))
        prefixes = {n.split("/", 1)[0] for n in self.bounds if "/" in n}
        for n in self.bounds:
            head = n.split("/", 1)[0] if "/" in n else n.split(".", 1)[0]
            if "/" in n or ("." in n and head in prefixes):
                self.robot_of.setdefault(n, head)

    @property
    def names(self) -> list[str]:
        return list(self.bounds)

    @property
    def clim(self):
        return self.srange if np.isfinite(self.srange[0]) else None

    def matching(self, selector: str) -> set[str]:
        """The pieces a --hide/--focus name selects: a piece, ``contacts``, ``obstacles``, or a robot (all its
        pieces)."""
        if selector == "obstacles":
            return set(self.obstacles)
        return {n for n in self.bounds if n == selector or self.robot_of.get(n) == selector}

    def box(self, names) -> tuple[np.ndarray, np.ndarray] | None:
        bs = [self.bounds[n] for n in names if n in self.bounds]
        if not bs:
            return None
        return np.min([b[:, 0] for b in bs], axis=0), np.max([b[:, 1] for b in bs], axis=0)

    @property
    def drawn_twice(self) -> set[str]:
        """A robot's rigid-body pieces (``<robot>.<link>``) where its link pieces (``<robot>/<link>``) draw
        the same surfaces: only the link pieces are drawn (two coincident surfaces flicker)."""
        with_links = {self.robot_of[n] for n in self.bounds if "/" in n and n in self.robot_of}
        return {n for n in self.bounds if "/" not in n and self.robot_of.get(n) in with_links}

    def cloud(self, names) -> np.ndarray:
        """(k, 3) points of the pieces ``names`` over the frames (a subsample of each)."""
        return np.concatenate([p for n in names for p in self.points.get(n, [])] or [np.zeros((0, 3))])

    def framing(self, focus: str | None, hidden: set[str]) -> tuple[np.ndarray, set[str]]:
        """The points the camera frames and the pieces it left out to draw faded: the ``focus`` pieces; by
        default the bodies that are not robots (a robot's reach would shrink a held object to a few
        pixels; the robots, drawn faded, stay visible around it), else the robots, with the obstacles no
        larger than that box (a half-space's patch, a big bin never dominate)."""
        if focus is not None:
            return self.cloud(self.matching(focus)), set()
        shown = [n for n in self.bounds if n not in hidden and n != "contacts"]
        bodies = [n for n in shown if n not in self.obstacles]
        subjects = [n for n in bodies if n not in self.robot_of] or bodies or shown
        box = self.box(subjects) or (-np.ones(3), np.ones(3))
        diag = float(np.linalg.norm(box[1] - box[0]))
        small = [n for n in shown if n in self.obstacles and n not in subjects
                 and np.linalg.norm(np.diff(self.bounds[n], axis=1)) <= diag]
        pts = self.cloud(subjects + small)
        if not len(pts):
            pts = np.array([-np.ones(3), np.ones(3)])
        if len(subjects) < len(bodies):       # robots left out: a margin shows the fingers around the object
            c = 0.5 * (pts.min(0) + pts.max(0))
            pts = c + ROBOT_MARGIN * (pts - c)
        return pts, set(bodies) - set(subjects)


def _available_arrays(loaded_frames) -> list[str]:
    """The arrays to colour by in the loaded frames (not the ``obstacle`` marker or ``TimeValue``)."""
    names: set[str] = set()
    for loaded in loaded_frames:
        for _, ds in loaded:
            names |= set(ds.point_data) | set(ds.cell_data)
    return sorted(names - {"TimeValue", "obstacle"})


def _drop_missing_scalars(kw: dict[str, Any], mesh, scalars: str | None, color: str) -> dict[str, Any]:
    """Plot in a plain colour when a filter (tube, glyph) did not carry the scalar array through."""
    if "scalars" not in kw or scalars in mesh.point_data or scalars in mesh.cell_data:
        return kw
    kw = {k: v for k, v in kw.items()
          if k not in ("scalars", "clim", "cmap", "show_scalar_bar", "scalar_bar_args")}
    kw["color"] = color
    return kw


def _marker_radii(loaded, contacts, default: float) -> np.ndarray:
    """Per contact point the radius of its marker, sized to the bodies it touches: a rod's radius
    (a bead centred on its surface, not a second cable), 4 % of a body's bounding-box diagonal (at most half its thinnest extent); the smaller of
    the two sides (the world side has no size); ``default`` where neither side is known."""
    scale: dict[str, float] = {}
    for e, ds in loaded:
        if ds.n_points == 0 or e["name"] == "contacts" or _is_obstacle(ds):
            continue
        if _kind(ds) == "lines" and "radius" in ds.point_data:
            scale[e["name"]] = float(np.mean(ds.point_data["radius"]))
        else:
            ext = np.diff(np.asarray(ds.bounds, float).reshape(3, 2), axis=1).ravel()
            scale[e["name"]] = min(0.04 * float(np.linalg.norm(ext)), 0.5 * float(ext.min()) or np.inf)
    n = contacts.n_points
    if "body_names" not in contacts.field_data or "body_a" not in contacts.point_data:
        return np.full(n, min(scale.values(), default=default))
    per_body = np.array([scale.get(str(b), np.inf) for b in contacts.field_data["body_names"]] + [np.inf])
    r = np.full(n, np.inf)
    for side in ("body_a", "body_b"):
        idx = np.asarray(contacts.point_data[side], int)
        r = np.minimum(r, per_body[np.where(idx < 0, -1, idx)])
    return np.where(np.isfinite(r), r, min(scale.values(), default=default))


def _add_frame(p, loaded, *, scalars, clim, diag, time, bar_title=None, hidden=frozenset(), faded=frozenset(),
               marker_scale: float = 1.0) -> None:
    """Draw one frame's pieces in ``p`` (its actors replaced): ``scalars`` coloured over ``clim`` with the bar
    titled ``bar_title``, ``hidden`` pieces left out, ``faded`` ones translucent, contact markers
    ``marker_scale`` times :func:`_marker_radii`, the time in the upper left; the camera is not moved."""
    import pyvista as pv

    p.clear_actors()
    bar_shown = False
    for e, ds in loaded:
        if ds.n_points == 0 or e["name"] in hidden:
            continue
        kind = _kind(ds)
        has_s = bool(scalars) and _scalar_values(ds, scalars) is not None
        color = _BODY_COLORS[e["part"] % len(_BODY_COLORS)]
        kw: dict[str, Any] = {"name": f"{e['part']}:{e['name']}"}
        if has_s:
            kw.update(scalars=scalars, clim=clim, cmap="viridis", show_scalar_bar=not bar_shown,
                      scalar_bar_args={"title": bar_title or scalars, "color": "black", "vertical": True,
                                       "position_x": 1.0 - BAR_SPACE + 0.03, "width": 0.07,
                                       "fmt": "%.3g", "label_font_size": max(10, p.window_size[1] // 40),
                                       "title_font_size": max(10, p.window_size[1] // 40)})
            bar_shown = True
        else:
            kw.update(color=color)
        if kind == "volume":
            p.add_mesh(ds, show_edges=True, edge_color="#303030", line_width=0.5, **kw)
        elif kind == "surface" and _is_obstacle(ds):
            if not has_s:
                kw["color"] = "lightgray"
            p.add_mesh(ds, opacity=0.35, show_edges=False, **kw)
        elif kind == "surface":                  # a rigid body's surface
            p.add_mesh(ds, show_edges=False, smooth_shading=True, opacity=FADED if e["name"] in faded else 1.0, **kw)
        elif kind == "lines":
            if isinstance(ds, pv.PolyData):
                poly = ds
            else:
                from vtkmodules.vtkFiltersGeometry import vtkGeometryFilter

                gf = vtkGeometryFilter()
                gf.SetInputData(ds)
                gf.Update()
                poly = pv.wrap(gf.GetOutput())
            if has_s and scalars in poly.cell_data and scalars not in poly.point_data:
                poly = poly.cell_data_to_point_data()    # a rod's per-segment strain survives the tube filter
            poly = poly.strip()
            if "radius" in poly.point_data:
                tube = poly.tube(scalars="radius", absolute=True, n_sides=16)
            else:
                tube = poly.tube(radius=0.004 * diag, n_sides=16)
            p.add_mesh(tube, **_drop_missing_scalars(kw, tube, scalars, color))
        else:  # points
            pts = pv.PolyData(np.asarray(ds.points))
            for name in ds.point_data:
                pts.point_data[name] = ds.point_data[name]
            if not has_s:
                kw["color"] = "#d62728"
            pts.point_data["marker_radius"] = float(marker_scale) * _marker_radii(loaded, ds, 0.008 * diag)
            sphere = pv.Sphere(radius=1.0, theta_resolution=12, phi_resolution=12)
            glyphs = pts.glyph(geom=sphere, scale="marker_radius", orient=False)
            p.add_mesh(glyphs, **_drop_missing_scalars(kw, glyphs, scalars, kw.get("color", color)))
    p.add_text(f"t = {time:.4g} s", position="upper_left", font_size=12, color="black",
               name="time")


BAR_SPACE = 0.25     # share of the picture's width kept free on the right for the scalar bar


def _setup_camera(p, pts, camera, reserve_right: float = 0.0) -> None:
    """Point the camera along ``camera`` at the points ``pts`` (k, 3) so that they fill the picture (10 %
    margin), leaving the right ``reserve_right`` of it for the colour bar."""
    center = 0.5 * (pts.min(0) + pts.max(0))
    if camera is None or camera == "iso":
        direction = np.array([1.0, -1.6, 0.9])
    elif isinstance(camera, str):
        views = {"xy": [0, 0, 1], "xz": [0, -1, 0], "yz": [1, 0, 0], "-xz": [0, 1, 0],
                 "-yz": [-1, 0, 0], "front": [0, -1, 0], "side": [1, 0, 0], "top": [0, 0, 1]}
        if camera not in views:
            raise ParameterError(f"camera {camera!r} unknown; use one of iso, {', '.join(views)} "
                                 "or (position, focal_point, view_up)")
        direction = np.asarray(views[camera], dtype=float)
    else:
        p.camera_position = [tuple(map(float, v)) for v in camera]
        return
    up = np.array([0.0, 1.0, 0.0] if camera in ("xy", "top") else [0.0, 0.0, 1.0])
    # fit the points as seen along the view: half-width and half-height on the view plane
    f = direction / np.linalg.norm(direction)
    upv = up - np.dot(up, f) * f
    upv /= np.linalg.norm(upv)
    right = np.cross(-f, upv)               # the picture's right, looking along −f
    rel = pts - center
    w, h, depth = np.abs(rel @ right).max(), np.abs(rel @ upv).max(), (rel @ f).max()
    width, height = p.window_size
    half = max(h, w * height / (width * (1.0 - reserve_right)), 1e-6) * 1.1     # a 10% margin
    dist = half / np.tan(np.radians(p.camera.view_angle) / 2) + depth
    # the bodies in the left (1 − reserve_right) of the picture: the view centre moves right
    focus = center + right * reserve_right * half * width / height
    p.camera_position = [tuple(focus + f * dist), tuple(focus), tuple(up)]
    p.reset_camera_clipping_range()


def _grab(p) -> np.ndarray:
    img = p.screenshot(return_img=True)
    return np.ascontiguousarray(img[..., :3])


def _tmp_beside(output: Path) -> Path:
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=output.suffix, dir=output.parent)
    os.close(fd)
    return Path(tmp)


def _write_movie(images, output: Path, fps: float, size: tuple[int, int]) -> None:
    tmp = _tmp_beside(output)
    try:
        if output.suffix.lower() == ".gif":
            from PIL import Image

            frames = [Image.fromarray(im).quantize(colors=255, method=Image.Quantize.MEDIANCUT)
                      for im in images]
            if not frames:
                raise ParameterError("no frames to write")
            frames[0].save(tmp, format="GIF", save_all=True, append_images=frames[1:],
                           duration=max(int(round(1000.0 / fps)), 20), loop=0)
        else:
            try:
                import imageio_ffmpeg
            except ImportError as exc:
                raise RenderError(
                    f"writing {output.suffix} needs imageio-ffmpeg: `pip install imageio-ffmpeg`, "
                    "or render to a .gif instead") from exc
            w, h = size[0] - size[0] % 2, size[1] - size[1] % 2
            gen = imageio_ffmpeg.write_frames(str(tmp), (w, h), fps=fps, macro_block_size=1,
                                              codec="libx264" if output.suffix.lower() in (".mp4", ".mov", ".mkv") else None,
                                              pix_fmt_out="yuv420p", quality=7, ffmpeg_log_level="error")
            gen.send(None)
            for im in images:
                gen.send(np.ascontiguousarray(im[:h, :w]))
            gen.close()
        os.chmod(tmp, 0o644)
        os.replace(tmp, output)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def render_series(pvd_path: str | os.PathLike, output: str | os.PathLike, *,
                  frame: int | None = None, scalars: str | None = None, every: int = 1,
                  fps: float = 30, window_size: tuple[int, int] = (1024, 768),
                  camera: str | Sequence[Sequence[float]] | None = None, hide: Sequence[str] = (),
                  focus: str | None = None) -> Path:
    """Render a ``.pvd`` series offscreen to a picture (``.png``, ``.jpg``) or movie (``.gif``, ``.mp4``).

    frame: index of the frame of a picture (negative from the end; default the last).
    scalars: point or cell array to colour by (vectors by magnitude), e.g. ``"von_mises"``;
        the colour range is fixed over all frames, the bar's title gives the name and unit.
        every: movie uses every k-th frame.
    camera: None/"iso", "xy", "xz", "yz", "-xz", "-yz", or (position, focal_point, view_up).
    hide: pieces not to draw: piece names, ``"contacts"``, ``"obstacles"``, a robot's name.
    focus: a piece or robot the camera frames (over the frames drawn); default: the bodies that are
        not robots (else the robots), with the obstacles no larger than them.
    Returns the output path. Raises :class:`RenderError` when no offscreen OpenGL works.
    """
    pvd_path, output = Path(pvd_path), Path(output)
    if not pvd_path.is_file():
        raise FileNotFoundError(f"no such .pvd file: {pvd_path}")
    suffix = output.suffix.lower()
    if suffix not in IMAGE_SUFFIXES | MOVIE_SUFFIXES:
        raise ParameterError(f"output {output.name!r}: use a picture ({', '.join(sorted(IMAGE_SUFFIXES))}) "
                             f"or a movie ({', '.join(sorted(MOVIE_SUFFIXES))})")
    if int(every) < 1:
        raise ParameterError(f"every must be >= 1, got {every}")
    if not fps > 0:
        raise ParameterError(f"fps must be > 0, got {fps}")
    frames = pvd_frames(pvd_path)
    if not frames:
        raise ParameterError(f"{pvd_path} lists no frames yet")
    if suffix in IMAGE_SUFFIXES:
        i = len(frames) - 1 if frame is None else int(frame)
        if not -len(frames) <= i < len(frames):
            raise ParameterError(f"frame {frame} out of range: the series has {len(frames)} frames")
        chosen = [frames[i]]
    else:
        if frame is not None:
            raise ParameterError("frame selects the frame of a picture; omit it for a movie")
        chosen = frames[::int(every)]
    if scalars:
        available = _available_arrays([_load(frames[-1][1])])
        if scalars not in available and all(
                _scalar_values(ds, scalars) is None for _, entries in chosen for _, ds in _load(entries)):
            raise ParameterError(f"no piece has an array {scalars!r}; available: {', '.join(available) or 'none'}")

    ensure_offscreen()
    import pyvista as pv

    pieces = _Pieces((_load(entries) for _, entries in _sample_frames(frames) + chosen), scalars)
    hidden: set[str] = set()
    for name in hide:
        sel = pieces.matching(name)
        if not sel and name not in ("contacts", "obstacles"):
            raise ParameterError(f"--hide {name!r}: no such piece; pieces: {', '.join(pieces.names)} "
                                 "(or contacts, obstacles, a robot's name)")
        hidden |= sel
    if focus is not None and (not pieces.matching(focus) or focus == "obstacles"):
        raise ParameterError(f"--focus {focus!r}: no such body; pieces: {', '.join(pieces.names)} (or a robot's name)")
    hidden |= pieces.drawn_twice
    framed, faded = pieces.framing(focus, hidden)
    clim = pieces.clim
    bar_title = field_label(scalars, pieces.vector) if scalars else None
    diag = float(np.linalg.norm(framed.max(0) - framed.min(0))) or 1.0
    output.parent.mkdir(parents=True, exist_ok=True)
    p = pv.Plotter(off_screen=True, window_size=[int(window_size[0]), int(window_size[1])])
    try:
        p.set_background("white")
        _setup_camera(p, framed, camera, BAR_SPACE if scalars else 0.0)
        cam = p.camera_position

        def images():
            for t, entries in chosen:
                _add_frame(p, _load(entries), scalars=scalars, clim=clim, diag=diag, time=t, bar_title=bar_title,
                           hidden=hidden, faded=faded)
                p.camera_position = cam
                yield _grab(p)

        if suffix in IMAGE_SUFFIXES:
            from PIL import Image

            img = next(images())
            tmp = _tmp_beside(output)
            try:
                Image.fromarray(img).save(tmp)  # format from the suffix, which the temp name keeps
                os.chmod(tmp, 0o644)
                os.replace(tmp, output)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
        else:
            _write_movie(images(), output, float(fps), (int(window_size[0]), int(window_size[1])))
    finally:
        p.close()
    return output


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------

def add_render_command(subparsers: "argparse._SubParsersAction") -> argparse.ArgumentParser:
    """Register ``render PVD OUTPUT [--frame N] [--scalars NAME] [--every K] [--fps F]``.

    The subcommand stores its handler in ``args.func``; ``args.func(args)`` returns the exit code.
    """
    p = subparsers.add_parser(
        "render",
        help="render a .pvd result series to a picture or a movie (offscreen)",
        description="Render a femcontact .pvd result series offscreen with PyVista: a picture of one "
                    "frame (OUTPUT ending in .png/.jpg) or a movie over all frames (.gif, or .mp4 "
                    "with imageio-ffmpeg installed). FEM bodies are drawn with edges, contact points "
                    "as spheres, rods as tubes, rigid bodies shaded, obstacles semi-transparent; the camera frames the bodies over all frames.")
    p.add_argument("pvd", metavar="PVD", help="the .pvd collection file written by a run")
    p.add_argument("output", metavar="OUTPUT", help="picture (.png, .jpg) or movie (.gif, .mp4) to write")
    p.add_argument("--frame", type=int, default=None, metavar="N",
                   help="frame index of a picture, negative counts from the end (default: last)")
    p.add_argument("--scalars", default=None, metavar="NAME",
                   help="point or cell array to colour by, e.g. von_mises or velocity (magnitude)")
    p.add_argument("--every", type=int, default=1, metavar="K", help="movie: use every K-th frame (default: 1)")
    p.add_argument("--fps", type=float, default=30.0, metavar="F", help="movie: frames per second (default: 30)")
    p.add_argument("--size", type=int, nargs=2, default=(1024, 768), metavar=("W", "H"),
                   help="image size in pixels (default: 1024 768)")
    p.add_argument("--camera", default=None,
                   choices=["iso", "xy", "xz", "yz", "-xz", "-yz"], help="view direction, z up (default: iso)")
    p.add_argument("--hide", action="append", default=[], metavar="NAME[,NAME]",
                   help="pieces not to draw: a piece name, contacts, obstacles or a robot's name (repeatable)")
    p.add_argument("--focus", default=None, metavar="BODY",
                   help="frame this body (a piece or robot name); default: the bodies that are not robots")
    p.set_defaults(func=_render_main)
    return p


def _render_main(args: argparse.Namespace) -> int:
    try:
        out = render_series(args.pvd, args.output, frame=args.frame, scalars=args.scalars,
                            every=args.every, fps=args.fps, window_size=tuple(args.size),
                            camera=args.camera, focus=args.focus,
                            hide=[n for h in args.hide for n in h.split(",") if n])
    except (FemcontactError, FileNotFoundError, OSError) as exc:
        print(f"femcontact render: error: {exc}", file=sys.stderr)
        return 1
    print(out)
    return 0
