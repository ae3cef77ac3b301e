"""Interactive 3D viewer of a result series (``OUT/run.pvd``) in the browser, through trame.

``femcontact view OUT`` serves a page (http://localhost:PORT/) with the scene rendered on the
server by PyVista/VTK (offscreen, as :mod:`femcontact.io.render` does: no GPU or display needed)
and streamed to the page as images. The page has (toolbar and side panel):

- a time slider and a play button (the series is re-read while the page is open, so a run that
  is still writing shows its new frames);
- "colour by": any point or cell array of the pieces (vectors by magnitude), its name and unit
  (:data:`femcontact.io.fields.FIELD_UNITS`) on the colour bar, the range fixed over the frames;
- "contacts": show or hide the contact points; their markers are sized to the bodies each contact
  touches (a cable's radius, 4 % of a ball's diagonal), not to the scene's extent, and a slider
  scales them (1: as ``femcontact render`` draws them);
- "body": frame one body or robot over the frames, "follow" frames it where it is and keeps it in
  view as it moves.

Frames are drawn by :mod:`femcontact.io.render`'s own functions (its pieces, colours, per-kind
styles, marker sizes and camera framing: by default the bodies that are not robots, the robots
faded around them). In Python, :func:`view` serves the same page; inside a
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
from .fields import field_label
from .vtk import pvd_frames

__all__ = ["Viewer", "view", "add_view_command", "ViewerUnavailable", "require_viewer", "serve_from_args",
           "free_port"]

_INSTALL = 'pip install "femcontact[view]"'
_MARKER_SCALE = 1.0       # default contact marker size, times render.py's (_marker_radii): the same as a picture
_SCAN_FRAMES = 60         # frames read (spread over the series) for the framing and the colour ranges


class ViewerUnavailable(FemcontactError, ImportError):
    """The optional viewer packages (trame) are not installed."""


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
        self._pieces: Any = None
        self._clims: dict[str, tuple[Any, str]] = {}
        self.frames: list = []
        self._reload()
        if not self.frames:
            raise FemcontactError(f"{self.pvd} lists no frames yet; wait for the run's first frame")
        last = len(self.frames) - 1
        self.fields = _render._available_arrays([self._loaded(0), self._loaded(last)])
        if field and field not in self.fields:
            raise ParameterError(f"no piece has an array {field!r}; available: {', '.join(self.fields) or 'none'}")
        self.bodies = self._body_names()
        if body and body not in self.bodies:
            raise ParameterError(f"no body {body!r} in the series; bodies: {', '.join(self.bodies)}")
        self.port: int | None = None
        self._follow_center: np.ndarray | None = None
        self._faded: set[str] = set()
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
        self.frames = pvd_frames(self.pvd)
        self._pieces = None                 # bounds and colour ranges over the new frames too
        self._clims.clear()
        return len(self.frames) != n

    def _loaded(self, i: int) -> list:
        if i not in self._cache:
            if len(self._cache) > 64:
                self._cache.pop(next(iter(self._cache)))
            self._cache[i] = _render._load(self.frames[i][1])
        return self._cache[i]

    def _sample(self):
        """The loaded frames scanned for the framing and the colour ranges (render.py's sample of them)."""
        return (self._loaded(k) for k in _render._sample_frames(range(len(self.frames)), _SCAN_FRAMES))

    @property
    def pieces(self) -> Any:
        """render.py's scan of the series (:class:`femcontact.io.render._Pieces`): bounds, obstacles, robots."""
        if self._pieces is None:
            self._pieces = _render._Pieces(self._sample(), None)
        return self._pieces

    def _body_names(self) -> list[str]:
        """The pieces a camera can frame (not obstacles, contacts or a robot's doubly drawn rigid bodies), then
        the robots' names (all their pieces)."""
        pieces = self.pieces
        kinds = {e["name"]: _render._kind(ds) for e, ds in self._loaded(len(self.frames) - 1)}
        names = [n for n in pieces.names if n not in pieces.obstacles and n not in pieces.drawn_twice
                 and kinds.get(n) != "points"]
        return names + sorted(set(pieces.robot_of.values()) - set(names))

    def _colouring(self, field: str) -> tuple[Any, str]:
        """The colour range of ``field`` over the frames and its bar title (name, unit)."""
        if field not in self._clims:
            scan = _render._Pieces(self._sample(), field)
            self._clims[field] = (scan.clim, field_label(field, scan.vector))
        return self._clims[field]

    def _body_in_frame(self, body: str, i: int) -> np.ndarray:
        """Points (k, 3) of ``body`` (a piece or a robot) in frame ``i``; none when it is not there."""
        return _render._Pieces([self._loaded(i)], None).cloud(self.pieces.matching(body))

    # -- drawing --------------------------------------------------------------------------
    def _build(self) -> None:
        _render.ensure_offscreen()
        import pyvista as pv

        self.plotter = pv.Plotter(off_screen=True, window_size=list(self._window_size))
        self.plotter.set_background("white")
        framed, _ = self.pieces.framing(None, self.pieces.drawn_twice)
        self._diag = float(np.linalg.norm(framed.max(0) - framed.min(0))) or 1.0
        self._frame_camera(self._init["body"], len(self.frames) - 1, self._init["follow"])

    def _frame_camera(self, body: str, i: int, follow: bool = False) -> None:
        """Point the camera as ``femcontact render`` does: at ``body`` over all frames, or at it in frame ``i``
        when ``follow`` (the camera then moves with it); with no body, render.py's default framing (robots
        drawn faded). The right of the picture is kept for the colour bar whether or not a field is shown,
        so choosing one does not move the view."""
        here = self._body_in_frame(body, i) if body else np.zeros((0, 3))
        if body and follow and len(here):
            pts, self._faded = here, set()
        else:
            pts, self._faded = self.pieces.framing(body or None, self.pieces.drawn_twice)
        _render._setup_camera(self.plotter, pts, None, _render.BAR_SPACE)
        self._follow_center = 0.5 * (here.min(0) + here.max(0)) if len(here) else None

    def draw(self, i: int, *, field: str = "", contacts: bool = True, marker: float = _MARKER_SCALE,
             body: str = "", follow: bool = False) -> None:
        """Draw frame ``i`` (from 0) in the plotter with the page's options."""
        i = max(0, min(int(i), len(self.frames) - 1))
        p = self.plotter
        if follow and body:
            here = self._body_in_frame(body, i)
            if len(here):
                c = 0.5 * (here.min(0) + here.max(0))
                if self._follow_center is not None:
                    d = c - self._follow_center
                    pos, foc, up = p.camera_position
                    p.camera_position = [tuple(np.add(pos, d)), tuple(np.add(foc, d)), up]
                self._follow_center = c
        cam = p.camera_position
        clim, title = self._colouring(field) if field else (None, None)
        hidden = self.pieces.drawn_twice | (set() if contacts else {"contacts"})
        _render._add_frame(p, self._loaded(i), scalars=field or None, clim=clim, diag=self._diag,
                           time=self.frames[i][0], bar_title=title, hidden=hidden, faded=self._faded,
                           marker_scale=marker)
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
        last = self._loaded(len(self.frames) - 1)
        state.update({"frame": len(self.frames) - 1, "n_frames": len(self.frames), "playing": False,
                      "marker": _MARKER_SCALE, "fields": [{"title": "body colours", "value": ""}]
                      + [{"title": field_label(f, _render._Pieces([last], f).vector), "value": f}
                         for f in self.fields],
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

        @state.change("frame", "field", "contacts", "marker")
        def _on_change(**_):
            redraw()

        @state.change("body", "follow")
        def _on_body(body, follow, **_):
            self._frame_camera(body, state.frame, follow)
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
                               title="contact marker radius, relative to the bodies the contacts touch "
                                     "(1: as femcontact render draws them)")
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
    p.add_argument("--body", default=None, metavar="NAME", help="body (a piece or a robot) to frame at start")
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
