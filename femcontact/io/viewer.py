"""Interactive 3D viewer of a result series (``OUT/run.pvd``) in the browser, through trame.

``femcontact view OUT`` serves a page (http://localhost:PORT/) with the scene rendered on the
server by PyVista/VTK (offscreen, as :mod:`femcontact.io.render` does: no GPU or display needed)
and streamed to the page as images. The page has (toolbar and side panel):

- a time slider and a play button (the series is re-read while the page is open, so a run that
  is still writing shows its new frames);
- "colour by": any point or cell array of the pieces (vectors by magnitude), its name and unit
  (:data:`FIELD_UNITS`) on the colour bar, the range fixed over the frames;
- "contacts": show or hide the contact points; their markers are sized relative to the bodies
  the contacts touch (a cable's radius, 5 % of a ball's size), not to the scene's extent, and a
  slider scales them;
- "body": frame one body (the camera fits it), "follow" keeps it in view as it moves.

Pieces are drawn as :func:`femcontact.io.render.render_series` draws them (its colours, camera
and per-kind styles are reused). In Python, :func:`view` serves the same page; inside a
Jupyter notebook it runs on the kernel's event loop and the returned :class:`Viewer` displays
as the page in an output cell.

Needs the optional extra ``view``: ``pip install "femcontact[view]"`` (trame, trame-vtk,
trame-vuetify, trame-pyvista).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import socket
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FemcontactError, ParameterError
from . import render as _render

__all__ = ["FIELD_UNITS", "field_label", "Viewer", "view", "add_view_command", "ViewerUnavailable",
           "require_viewer", "serve_from_args", "free_port"]

#: Units of the arrays femcontact writes (name -> unit; "1" dimensionless). Arrays not listed are
#: labelled by name only.
FIELD_UNITS: dict[str, str] = {
    "von_mises": "Pa", "stress": "Pa", "displacement": "m", "velocity": "m/s",
    "angular_velocity": "rad/s", "force": "N", "impulse": "N s", "gap": "m", "normal": "1",
    "radius": "m", "stretch": "1", "shear": "1", "bend": "1/m", "twist": "rad/m",
    "state": "0 open, 1 stick, 2 slip", "body_a": "index", "body_b": "index",
}
_INSTALL = 'pip install "femcontact[view]"'
_HIDDEN_ARRAYS = {"obstacle", "TimeValue"}
_MARKER_SCALE = 0.6       # default contact marker radius / the scene's marker base (_marker_base)
_SCAN_FRAMES = 60         # frames sampled for bounds and colour ranges


class ViewerUnavailable(FemcontactError, ImportError):
    """The optional viewer packages (trame) are not installed."""


def field_label(name: str, vector: bool = False) -> str:
    """Colour bar title of an array: ``"von_mises (Pa)"``, ``"|velocity| (m/s)"`` for a vector."""
    unit = FIELD_UNITS.get(name)
    base = f"|{name}|" if vector else name
    return f"{base} ({unit})" if unit else base


def require_viewer() -> None:
    """Raise :class:`ViewerUnavailable` with the pip command when the 'view' extra is missing."""
    try:
        import trame  # noqa: F401
        import trame_pyvista  # noqa: F401
        import trame_vtk  # noqa: F401
        import trame_vuetify  # noqa: F401
    except ImportError as exc:
        raise ViewerUnavailable(f"the viewer needs the optional packages of femcontact's 'view' extra "
                                f"({exc.name} is missing): {_INSTALL}") from None


def _pvd_of(out: str | os.PathLike) -> Path:
    out = Path(out)
    pvd = out if out.suffix == ".pvd" else out / "run.pvd"
    if not pvd.is_file():
        raise FemcontactError(f"no result series at {pvd}: give the output folder of a run (it holds run.pvd), "
                              "e.g. `femcontact run scenes/cube_drop.py --out out/cube` then "
                              "`femcontact view out/cube`")
    return pvd


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _marker_base(ds, kind: str) -> float | None:
    """A piece's contact-marker size: a rod's radius; 5 % of the geometric mean of another body's box
    extents (a ball's or a finger's size, a thin mat's a little more than its thickness)."""
    if kind == "lines" and "radius" in ds.point_data and ds.n_points:
        return float(np.median(np.asarray(ds.point_data["radius"])))
    ext = np.diff(np.asarray(ds.bounds).reshape(3, 2), axis=1).ravel()
    ext = ext[ext > 0]
    return 0.05 * float(np.exp(np.log(ext).mean())) if ext.size else None


class Viewer:
    """An interactive view of one series: a trame server around an offscreen PyVista plotter.

    ``Viewer(out).serve(port)`` blocks serving the page; ``start_task(port)`` schedules the server
    on the running asyncio loop (a Jupyter kernel's). Options set the initial state of the page:
    ``field`` (array to colour by), ``contacts`` (shown), ``body`` (piece to frame), ``follow``.
    """

    def __init__(self, out: str | os.PathLike, *, field: str | None = None, contacts: bool = True,
                 body: str | None = None, follow: bool = False, fps: float = 10.0,
                 window_size: tuple[int, int] = (1024, 768)) -> None:
        require_viewer()
        self.pvd = _pvd_of(out)
        self.fps = float(fps)
        if not self.fps > 0:
            raise ParameterError(f"fps must be > 0, got {fps}")
        self._mtime = -1.0
        self._cache: dict[int, list] = {}
        self.frames: list = []
        self._reload()
        if not self.frames:
            raise FemcontactError(f"{self.pvd} lists no frames yet; wait for the run's first frame")
        names = self._piece_kinds()
        self.bodies = [n for n, k in names.items() if k != "points" and not self._obstacle(n)]
        self.fields = self._field_names()
        if field and field not in self.fields:
            raise ParameterError(f"no piece has an array {field!r}; available: {', '.join(self.fields) or 'none'}")
        if body and body not in self.bodies:
            raise ParameterError(f"no body {body!r} in the series; bodies: {', '.join(self.bodies)}")
        self.port: int | None = None
        self._clims: dict[str, Any] = {}
        self._follow_center: np.ndarray | None = None
        self._marker_base: float | None = None
        self._init = {"field": field or "", "contacts": bool(contacts), "body": body or "",
                      "follow": bool(follow)}
        self._window_size = window_size
        self._build()

    # -- the series -----------------------------------------------------------------------
    def _reload(self) -> bool:
        """Re-read the .pvd when it changed (a run still writing); True when frames were added."""
        try:
            mtime = self.pvd.stat().st_mtime
        except OSError:
            return False
        if mtime == self._mtime:
            return False
        n = len(self.frames)
        self._mtime = mtime
        self.frames = _render._frames(self.pvd)
        return len(self.frames) != n

    def _loaded(self, i: int) -> list:
        if i not in self._cache:
            if len(self._cache) > 64:
                self._cache.pop(next(iter(self._cache)))
            self._cache[i] = _render._load(self.frames[i][1])
        return self._cache[i]

    def _piece_kinds(self) -> dict[str, str]:
        return {e["name"]: _render._kind(ds) for e, ds in self._loaded(len(self.frames) - 1)}

    def _obstacle(self, name: str) -> bool:
        return any(e["name"] == name and _render._is_obstacle(ds) for e, ds in self._loaded(len(self.frames) - 1))

    def _field_names(self) -> list[str]:
        names: set[str] = set()
        for i in {0, len(self.frames) - 1}:
            for _, ds in self._loaded(i):
                names |= set(ds.point_data) | set(ds.cell_data)
        return sorted(names - _HIDDEN_ARRAYS)

    def _sample(self) -> list:
        n = len(self.frames)
        idx = range(n) if n <= _SCAN_FRAMES else np.linspace(0, n - 1, _SCAN_FRAMES).astype(int)
        return [self.frames[k] for k in idx]

    def _is_vector(self, field: str) -> bool:
        for _, ds in self._loaded(len(self.frames) - 1):
            for data in (ds.point_data, ds.cell_data):
                if field in data:
                    return np.asarray(data[field]).ndim > 1
        return False

    def marker_radius(self, scale: float) -> float:
        """Contact marker radius: ``scale`` times the smallest marker base (:func:`_marker_base`: a cable's
        radius, 5 % of a solid's size) of the bodies the contacts touch, so markers stay smaller than a
        thin cable or a small ball however large the scene."""
        if self._marker_base is None:
            touched, every = set(), {}
            for _, entries in self._sample():
                loaded = _render._load(entries)
                pts = [np.asarray(ds.points) for _, ds in loaded if _render._kind(ds) == "points" and ds.n_points]
                pts = np.vstack(pts) if pts else np.zeros((0, 3))
                for e, ds in loaded:
                    if e["name"] not in self.bodies or not ds.n_points:
                        continue
                    base = _marker_base(ds, _render._kind(ds))
                    if base:
                        every[e["name"]] = min(base, every.get(e["name"], np.inf))
                    b = np.asarray(ds.bounds).reshape(3, 2)
                    pad = 0.02 * np.linalg.norm(b[:, 1] - b[:, 0]) + 1e-12
                    if len(pts) and np.all((pts >= b[:, 0] - pad) & (pts <= b[:, 1] + pad), axis=1).any():
                        touched.add(e["name"])
            sizes = [every[n] for n in (touched or every) if n in every]
            self._marker_base = min(sizes) if sizes else self._diag * 0.005
        return float(scale) * self._marker_base

    def _body_box(self, name: str, i: int) -> tuple[np.ndarray, np.ndarray] | None:
        for e, ds in self._loaded(i):
            if e["name"] == name and ds.n_points:
                b = np.asarray(ds.bounds).reshape(3, 2)
                return b[:, 0], b[:, 1]
        return None

    # -- drawing --------------------------------------------------------------------------
    def _build(self) -> None:
        _render.ensure_offscreen()
        import pyvista as pv

        self.plotter = pv.Plotter(off_screen=True, window_size=list(self._window_size))
        self.plotter.set_background("white")
        self._lo, self._hi, _ = _render._scan(self._sample(), None)
        self._diag = float(np.linalg.norm(self._hi - self._lo)) or 1.0
        self._frame_camera(self._init["body"], len(self.frames) - 1)

    def _frame_camera(self, body: str, i: int) -> None:
        """Fit the camera to ``body`` in frame ``i`` (all bodies over all frames when ""), leaving the right
        for the colour bar whether or not a field is shown, so choosing one does not move the view."""
        box = self._body_box(body, i) if body else None
        lo, hi = box if box is not None else (self._lo, self._hi)
        _render._setup_camera(self.plotter, lo, hi, None, _render.BAR_SPACE)
        self._follow_center = 0.5 * (lo + hi) if box is not None else None

    def draw(self, i: int, *, field: str = "", contacts: bool = True, marker: float = _MARKER_SCALE,
             body: str = "", follow: bool = False) -> None:
        """Draw frame ``i`` (from 0) in the plotter with the page's options."""
        import pyvista as pv

        i = max(0, min(int(i), len(self.frames) - 1))
        loaded = self._loaded(i)
        field = field or None
        if field and field not in self._clims:
            self._clims[field] = _render._scan(self._sample(), field)[2]
        clim = self._clims.get(field) if field else None
        p = self.plotter
        if follow and body:
            box = self._body_box(body, i)
            if box is not None:
                c = 0.5 * (box[0] + box[1])
                if self._follow_center is not None:
                    d = c - self._follow_center
                    pos, foc, up = p.camera_position
                    p.camera_position = [tuple(np.add(pos, d)), tuple(np.add(foc, d)), up]
                self._follow_center = c
        cam = p.camera_position
        points = [(e, ds) for e, ds in loaded if _render._kind(ds) == "points"]
        _render._add_frame(p, [(e, ds) for e, ds in loaded if _render._kind(ds) != "points"],
                           scalars=field, clim=clim, diag=self._diag, time=self.frames[i][0])
        if contacts:
            r = self.marker_radius(marker)
            sphere = pv.Sphere(radius=r, theta_resolution=10, phi_resolution=10)
            for e, ds in points:
                if not ds.n_points:
                    continue
                pts = pv.PolyData(np.asarray(ds.points))
                for name in ds.point_data:
                    pts.point_data[name] = ds.point_data[name]
                glyphs = pts.glyph(geom=sphere, scale=False, orient=False)
                kw: dict[str, Any] = {"color": "#d62728"}
                if field and field in glyphs.point_data:
                    kw = {"scalars": field, "clim": clim, "cmap": "viridis", "show_scalar_bar": not p.scalar_bars,
                          "scalar_bar_args": {"title": field, "color": "black", "vertical": True,
                                              "position_x": 1.0 - _render.BAR_SPACE + 0.03, "width": 0.07,
                                              "fmt": "%.3g"}}
                p.add_mesh(glyphs, name=f"{e['part']}:{e['name']}", reset_camera=False, **kw)
        if field and p.scalar_bars:
            for bar in p.scalar_bars.values():
                bar.SetTitle(field_label(field, self._is_vector(field)))
        p.add_text(f"t = {self.frames[i][0]:.4g} s   frame {i + 1}/{len(self.frames)}", position="upper_left",
                   font_size=12, color="black", name="time")
        p.camera_position = cam

    # -- the page -------------------------------------------------------------------------
    def _page(self):
        """The trame server and its layout (built once)."""
        if getattr(self, "_server", None) is not None:
            return self._server, self._layout
        import asyncio

        from trame.app import get_server
        from trame.ui.vuetify3 import SinglePageWithDrawerLayout
        from trame.widgets import html
        from trame.widgets import vuetify3 as v3
        from trame_pyvista import PyVistaRemoteView

        server = get_server(f"femcontact-view-{id(self)}", client_type="vue3")
        state, ctrl = server.state, server.controller
        state.trame__title = f"femcontact · {self.pvd.parent.name}"
        state.update({"frame": len(self.frames) - 1, "n_frames": len(self.frames), "playing": False,
                      "marker": _MARKER_SCALE, "fields": [{"title": "body colours", "value": ""}]
                      + [{"title": field_label(f, self._is_vector(f)), "value": f} for f in self.fields],
                      "bodies": [{"title": "all bodies", "value": ""}]
                      + [{"title": b, "value": b} for b in self.bodies], **self._init})

        def redraw(**_):
            try:
                self.draw(state.frame, field=state.field, contacts=state.contacts, marker=state.marker,
                          body=state.body, follow=state.follow)
            except Exception:      # noqa: BLE001 - trame drops a callback's exception silently: say it
                import traceback

                traceback.print_exc()
                return
            push()

        pushes = [0]

        def push(n: int | None = None) -> None:
            """Send the view's image, again 0.6 s and 1.5 s later: trame-vtk's image stream drops an image
            whose JPEG encoding takes over 0.5 s (a busy machine) until the next push."""
            if n is not None and n != pushes[0]:
                return                                   # a newer draw has its own pushes
            ctrl.view_update()
            if n is None:
                pushes[0] += 1
                with contextlib.suppress(RuntimeError):  # no running loop: not serving yet
                    loop = asyncio.get_running_loop()
                    for delay in (0.6, 1.5):
                        loop.call_later(delay, push, pushes[0])

        @state.change("frame", "field", "contacts", "marker", "follow")
        def _on_change(**_):
            redraw()

        @state.change("body")
        def _on_body(body, **_):
            self._frame_camera(body, state.frame)
            redraw()

        async def play():
            while state.playing:
                await asyncio.sleep(1.0 / self.fps)
                if not state.playing:
                    break
                with state:
                    state.frame = (state.frame + 1) % len(self.frames)

        @state.change("playing")
        def _on_play(playing, **_):
            if playing:
                asyncio.ensure_future(play())

        async def watch():          # new frames of a run still writing
            while True:
                await asyncio.sleep(2.0)
                if self._reload():
                    self._cache.clear()
                    with state:
                        at_end = state.frame >= state.n_frames - 1
                        state.n_frames = len(self.frames)
                        if at_end and not state.playing:
                            state.frame = len(self.frames) - 1

        ctrl.on_server_ready.add(lambda **_: asyncio.ensure_future(watch()))

        with SinglePageWithDrawerLayout(server, width=260) as layout:
            layout.title.set_text(self.pvd.parent.name)
            with layout.toolbar as tb:
                tb.density = "compact"
                v3.VBtn(icon=("playing ? 'mdi-pause' : 'mdi-play'",), click="playing = !playing",
                        variant="text", title="play / pause")
                v3.VSlider(v_model_number=("frame",), min=0, max=("n_frames - 1",), step=1, hide_details=True,
                           density="compact", classes="mx-2")
                html.Div("frame {{ frame + 1 }} / {{ n_frames }}", classes="text-body-2 mr-4",
                         style="white-space: nowrap")
            with layout.drawer:
                with v3.VContainer(classes="pa-3"):
                    v3.VSelect(label="colour by", v_model=("field",), items=("fields",), hide_details=True,
                               density="compact", classes="mb-4")
                    v3.VCheckbox(label="contacts", v_model=("contacts",), hide_details=True, density="compact")
                    v3.VSlider(label="marker", v_model_number=("marker",), min=0.1, max=3.0, step=0.1,
                               disabled=("!contacts",), hide_details=True, density="compact", classes="mb-4",
                               title="contact marker radius, relative to the bodies the contacts touch")
                    v3.VSelect(label="body", v_model=("body",), items=("bodies",), hide_details=True,
                               density="compact")
                    v3.VCheckbox(label="follow the body", v_model=("follow",), disabled=("!body",),
                                 hide_details=True, density="compact")
            with layout.content:
                with v3.VContainer(fluid=True, classes="pa-0 fill-height"):
                    view = PyVistaRemoteView(self.plotter, interactive_ratio=1, still_ratio=1)
                    ctrl.view_update = view.update
        self.draw(state.frame, **self._init)
        self._server, self._layout = server, layout
        return server, layout

    @property
    def url(self) -> str:
        """Address of the page once the server listens."""
        if self.port is None:
            raise FemcontactError("the viewer is not serving yet; call serve() or start_task()")
        return f"http://localhost:{self.port}/"

    def serve(self, port: int | None = None, *, host: str = "localhost", open_browser: bool = True) -> None:
        """Serve the page on ``port`` (a free one when None) until interrupted (Ctrl-C); print its address and
        open it in the system browser when ``open_browser`` and a display exists."""
        self._listen(port, host)
        browser = open_browser and _has_display()
        print(f"femcontact view: serving {self.pvd} ({len(self.frames)} frames) at {self.url} "
              f"({'opening it in the browser; ' if browser else 'open it in a browser; '}Ctrl-C stops)", flush=True)
        with _own_argv():
            self._server.start(port=self.port, host=host, open_browser=browser, timeout=0,
                               show_connection_info=False, disable_logging=True, exec_mode="main")

    def start_task(self, port: int | None = None, *, host: str = "localhost") -> "Viewer":
        """Schedule the server on the running asyncio loop (Jupyter's) and return at once."""
        self._listen(port, host)
        with _own_argv():
            self._server.start(port=self.port, host=host, open_browser=False, timeout=0,
                               show_connection_info=False, disable_logging=True, exec_mode="task")
        return self

    def _listen(self, port: int | None, host: str) -> None:
        """Build the page and choose the port: a free one, or ``port`` if nothing listens there."""
        if port is not None and not 0 < int(port) < 65536:
            raise ParameterError(f"port must be 1..65535, got {port}")
        if port:
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1" if host == "localhost" else host, int(port)))
                except OSError as exc:
                    raise FemcontactError(f"cannot serve on port {port} ({exc.strerror}); give another --port, "
                                          "or leave it out for a free one") from None
        self._page()
        self.port = int(port) if port else free_port()

    def _repr_html_(self) -> str:
        if self.port is None:
            return f"<pre>{self!r}</pre>"
        return (f'<iframe src="{self.url}index.html?reconnect=auto" '
                'style="width: 100%; height: 600px; border: 1px solid #ddd;"></iframe>')

    def __repr__(self) -> str:
        where = f", serving {self.url}" if self.port else ""
        return f"Viewer({str(self.pvd)!r}, {len(self.frames)} frames{where})"


@contextlib.contextmanager
def _own_argv():
    """trame parses ``sys.argv`` when a server starts: hide femcontact's own options from it."""
    saved = sys.argv
    sys.argv = saved[:1]
    try:
        yield
    finally:
        sys.argv = saved


def _has_display() -> bool:
    """Whether a browser window can open here (a desktop; not an ssh session or a container)."""
    return sys.platform != "linux" or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def _in_running_loop() -> bool:
    import asyncio          # here, not at the top: `femcontact --help` imports this module

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def view(out: str | os.PathLike, *, port: int | None = None, open_browser: bool = True,
         **options: Any) -> Viewer:
    """Open the interactive viewer of the run in folder ``out`` (or a ``.pvd`` file).

    In a Jupyter notebook (an asyncio loop is running) the server runs beside the kernel and the
    returned :class:`Viewer` shows the page in the cell; elsewhere this serves the page and blocks
    until Ctrl-C (``open_browser`` opens it in the system browser). ``options``: ``field``,
    ``contacts``, ``body``, ``follow``, ``fps`` (see :class:`Viewer`). Raises
    :class:`ViewerUnavailable` naming the pip command when the ``view`` extra is missing.
    """
    v = Viewer(out, **options)
    if _in_running_loop():        # a Jupyter kernel runs cells inside its asyncio loop
        return v.start_task(port)
    v.serve(port, open_browser=open_browser)   # blocks until Ctrl-C
    return v


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------

def add_view_command(subparsers: "argparse._SubParsersAction") -> argparse.ArgumentParser:
    """Register ``view OUT [--port P] [--no-browser] [--field NAME] [--body NAME] [--hide-contacts]``."""
    p = subparsers.add_parser(
        "view", help="interactive 3D view of a run's series in the browser (needs the 'view' extra)",
        description="Serve an interactive 3D view of OUT/run.pvd at http://localhost:PORT/: time slider and "
                    "play, colour by any array (unit on the colour bar), contacts shown or hidden, frame or "
                    "follow one body. Rendering runs on this machine (offscreen); open the address from any "
                    f"browser (ssh -L PORT:localhost:PORT for a remote machine). Ctrl-C stops it. Needs {_INSTALL}.")
    p.add_argument("out", metavar="OUT", help="output folder of a run (holding run.pvd), or a .pvd file")
    add_view_options(p)
    p.set_defaults(func=_view_main)
    return p


def add_view_options(p: argparse.ArgumentParser) -> None:
    """The viewer's options, shared by ``view`` and ``run --view``."""
    p.add_argument("--port", type=int, default=None, metavar="P", help="port to serve on (default: a free one)")
    p.add_argument("--host", default="localhost",
                   help="address to listen on (default: localhost; 0.0.0.0 serves other machines too)")
    p.add_argument("--no-browser", action="store_true",
                   help="only print the address, do not open a browser (none opens where there is no display)")
    p.add_argument("--field", default=None, metavar="NAME", help="array to colour by at start, e.g. von_mises")
    p.add_argument("--body", default=None, metavar="NAME", help="piece to frame at start")
    p.add_argument("--hide-contacts", action="store_true", help="start with the contact points hidden")


def serve_from_args(out: str | os.PathLike, args: argparse.Namespace) -> int:
    """Serve the viewer of ``out`` with the options of :func:`add_view_options` until Ctrl-C; the exit code."""
    v = Viewer(out, field=args.field, body=args.body, contacts=not args.hide_contacts)
    try:
        v.serve(args.port, host=args.host, open_browser=not args.no_browser)
    except KeyboardInterrupt:
        pass
    return 0


def _view_main(args: argparse.Namespace) -> int:
    try:
        return serve_from_args(args.out, args)
    except FemcontactError as exc:
        print(f"femcontact view: error: {exc}", file=sys.stderr)
        return 1
