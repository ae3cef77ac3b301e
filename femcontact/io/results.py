"""Reading a run's results back: ``femcontact.read(OUT)`` and ``femcontact.plot(OUT)``.

``read`` indexes ``OUT/run.pvd`` (every frame, not only the first as ``pyvista.read`` gives) and loads
frame files only when asked, one piece at a time::

    res = femcontact.read("out/gripper_ball")
    res.times                        # (n_frames,) s, increasing
    res[-1].meshes["ball"]           # a frame's pieces as pyvista datasets
    res.positions("ball")            # (n_frames, n_points, 3) m
    res.field("ball", "von_mises")   # (n_frames, n_cells) Pa
    res.contact_force("ball")        # (n_frames, 3) N, world frame: total contact force on the body
    res.stick_slip("ball")           # (n_frames, 2): sticking and sliding contacts of the body
    res.steps["e_m"]                 # OUT/steps.csv as columns ({} without the file)
    res.joints("panda")              # OUT/panda_joints.csv as columns

Contacts are attributed to bodies through the ``contacts`` piece's point data ``body_a``/``body_b``
(indices into its field data ``body_names``, -1 for the world or an obstacle; its ``force`` acts
on B and its opposite on A: ``io.frames.contact_pieces``). A robot's name stands for all its
bodies (field data ``body_robots``).

``plot`` draws the contact force, the stick/slip counts and the contact solver's momentum error
``e_m`` (from ``steps.csv``) against time with matplotlib (extra ``plot``); ``femcontact plot OUT
--contacts BODY --save FILE.png`` is the same from the command line.
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Optional

import numpy as np

from ..errors import FemcontactError, ParameterError
from .vtk import atomic_write_bytes, pvd_frames, sanitize_name

if TYPE_CHECKING:  # pragma: no cover
    import pyvista
    from matplotlib.figure import Figure

__all__ = ["RunResults", "Frame", "read", "plot", "add_plot_command", "CONTACTS", "STEPS_CSV"]

CONTACTS = "contacts"          # the series' piece of contact points
STEPS_CSV = "steps.csv"        # per-step statistics beside run.pvd (written by Simulator.run)
OPEN, STICK, SLIP = 0, 1, 2    # the contacts' ``state`` values (contact.contacts)


@dataclass
class Frame:
    """One written frame: its time (s), its step number when known (from steps.csv; 0 at t = 0, else
    None) and its pieces, loaded at the first access of ``meshes``."""

    index: int
    time: float
    step: Optional[int]
    files: dict[str, Path]
    _meshes: Optional[dict] = field(default=None, repr=False)

    @property
    def meshes(self) -> dict[str, "pyvista.DataSet"]:
        """{piece name: pyvista dataset} of this frame."""
        if self._meshes is None:
            self._meshes = {name: _load(path) for name, path in self.files.items()}
        return self._meshes


def _load(path: Path):
    import pyvista as pv

    if not path.is_file():
        raise FemcontactError(f"frame file {path} is listed in the series but missing; the folder was changed "
                              "after the run")
    return pv.read(path)


def _read_csv(path: Path) -> dict[str, np.ndarray]:
    """Columns of a numeric CSV with a header (empty cells: nan); a torn last row is left out."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        return {}
    header = rows[0]
    body = [r for r in rows[1:] if len(r) == len(header)]
    try:
        data = np.array([[float(v) if v.strip() else np.nan for v in r] for r in body], float).reshape(-1, len(header))
    except ValueError as exc:
        raise FemcontactError(f"{path} holds a value that is not a number ({exc})") from None
    return {name: data[:, k] for k, name in enumerate(header)}


class RunResults:
    """The frames of one run (``read``): times, pieces, per-piece arrays over time, contact forces."""

    def __init__(self, out: str | os.PathLike):
        out = Path(out)
        pvd = out if out.suffix == ".pvd" else out / "run.pvd"
        if not pvd.is_file():
            raise FemcontactError(f"{str(out)!r} holds no run.pvd: give the --out folder of a finished or running "
                                  "`femcontact run` (or Simulator.run(out=...))")
        self.out, self.pvd = pvd.parent, pvd
        try:
            frames = pvd_frames(pvd)
        except Exception as exc:  # noqa: BLE001 - ParseError, ValueError: a damaged collection
            raise FemcontactError(f"{pvd} is not a readable .pvd ({exc})") from None
        steps_path = self.out / STEPS_CSV
        self.steps: dict[str, np.ndarray] = _read_csv(steps_path) if steps_path.is_file() else {}
        self.times = np.array([t for t, _ in frames], float)
        order: dict[str, int] = {}
        for _, entries in frames:
            for e in entries:
                order.setdefault(e["name"], e["part"])
        self.pieces: list[str] = sorted(order, key=order.get)
        step_of = self._frame_steps()
        self._frames = [Frame(i, t, step_of[i], {e["name"]: e["file"] for e in entries})
                        for i, (t, entries) in enumerate(frames)]
        self._contacts: Optional[list[dict[str, np.ndarray]]] = None
        self._bodies: Optional[tuple[list[str], list[str]]] = None

    # -- frames --------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._frames)

    def __getitem__(self, i: int) -> Frame:
        return self._frames[i]

    def __iter__(self) -> Iterator[Frame]:
        return iter(self._frames)

    def __repr__(self) -> str:
        span = f"t = {self.times[0]:g} … {self.times[-1]:g} s" if len(self) else "no frames"
        return f"RunResults({str(self.out)!r}: {len(self)} frames, {span}, pieces {self.pieces})"

    def _frame_steps(self) -> list[Optional[int]]:
        """Each frame's step number: 0 at t = 0, else the steps.csv row at the frame's time (None without)."""
        out: list[Optional[int]] = [0 if t == 0 else None for t in self.times]
        t_rows, s_rows = self.steps.get("time"), self.steps.get("step")
        if t_rows is None or s_rows is None or not len(t_rows):
            return out
        tol = 0.25 * (float(np.min(np.diff(np.unique(t_rows)))) if len(np.unique(t_rows)) > 1 else abs(t_rows[0]))
        for i, t in enumerate(self.times):
            k = int(np.argmin(np.abs(t_rows - t)))
            if abs(t_rows[k] - t) <= tol:
                out[i] = int(s_rows[k])
        return out

    # -- per-piece arrays ------------------------------------------------------
    def _check_piece(self, piece: str) -> None:
        if piece not in self.pieces:
            raise ParameterError(f"no piece {piece!r} in {self.pvd}; pieces: {', '.join(self.pieces)}")

    def _series(self, piece: str) -> list:
        """The piece's dataset in every frame (a frame without it: FemcontactError)."""
        self._check_piece(piece)
        missing = [f.index for f in self._frames if piece not in f.files]
        if missing:
            raise FemcontactError(f"piece {piece!r} is missing from frames {missing[:5]}; read those frames "
                                  "one by one (res[i].meshes)")
        return [f.meshes[piece] if f._meshes is not None else _load(f.files[piece]) for f in self._frames]

    @staticmethod
    def _stack(arrays: list[np.ndarray], what: str) -> np.ndarray:
        if not arrays:
            return np.zeros((0,))
        if len({a.shape for a in arrays}) > 1:
            raise FemcontactError(f"{what} changes size between frames (e.g. contact points); read it frame by "
                                  "frame (res[i].meshes) or use contact_force / stick_slip")
        return np.stack(arrays)

    def positions(self, piece: str) -> np.ndarray:
        """(n_frames, n_points, 3) point positions (m) of a piece in every frame: an FEM body's or rod's
        nodes, a rigid body's or robot link's surface vertices."""
        return self._stack([np.asarray(ds.points, float) for ds in self._series(piece)], f"piece {piece!r}")

    def field(self, piece: str, name: str) -> np.ndarray:
        """(n_frames, n, ...) point or cell array ``name`` of a piece in every frame (units:
        ``femcontact.io.fields.FIELD_UNITS``)."""
        arrays = []
        for ds in self._series(piece):
            for data in (ds.point_data, ds.cell_data):
                if name in data:
                    arrays.append(np.asarray(data[name]))
                    break
            else:
                names = sorted((set(ds.point_data) | set(ds.cell_data)) - {"TimeValue"})
                raise ParameterError(f"piece {piece!r} has no array {name!r}; it has: {', '.join(names) or 'none'}")
        return self._stack(arrays, f"{name!r} of piece {piece!r}")

    # -- contacts --------------------------------------------------------------
    def _contact_frames(self) -> list[dict[str, np.ndarray]]:
        """Per frame the contacts' force (c, 3), state (c,), body_a, body_b (c,) (-2: not recorded)."""
        if self._contacts is None:
            out = []
            for f in self._frames:
                if CONTACTS not in f.files:
                    out.append({"force": np.zeros((0, 3)), "state": np.zeros(0, int),
                                "body_a": np.zeros(0, int), "body_b": np.zeros(0, int)})
                    continue
                ds = f.meshes[CONTACTS] if f._meshes is not None else _load(f.files[CONTACTS])
                pd, c = ds.point_data, ds.n_points
                out.append({"force": np.asarray(pd["force"], float).reshape(c, 3) if "force" in pd else np.zeros((c, 3)),
                            "state": np.asarray(pd["state"], int) if "state" in pd else np.zeros(c, int),
                            "body_a": np.asarray(pd["body_a"], int) if "body_a" in pd else np.full(c, -2),
                            "body_b": np.asarray(pd["body_b"], int) if "body_b" in pd else np.full(c, -2)})
                if self._bodies is None and "body_names" in ds.field_data:
                    names = [str(s) for s in ds.field_data["body_names"]]
                    robots = ([str(s) for s in ds.field_data["body_robots"]] if "body_robots" in ds.field_data
                              else [""] * len(names))
                    self._bodies = (names, robots)
            self._contacts = out
        return self._contacts

    @property
    def bodies(self) -> list[str]:
        """The scene's bodies in the order ``body_a``/``body_b`` index them (empty for a run without
        contact or written before the contacts recorded their bodies)."""
        self._contact_frames()
        return list(self._bodies[0]) if self._bodies else []

    def _body_mask(self, body: str, index: np.ndarray) -> np.ndarray:
        names, robots = self._bodies if self._bodies else ([], [])
        if body in names:
            return index == names.index(body)
        if body in robots:
            return np.isin(index, [k for k, r in enumerate(robots) if r == body])
        raise AssertionError  # _check_body ran first

    def _check_body(self, body: str) -> None:
        frames = self._contact_frames()
        if any((c["body_a"] == -2).any() for c in frames):
            raise FemcontactError(f"{self.pvd} was written before contacts recorded their bodies (point data "
                                  "body_a/body_b); rerun the scene to attribute forces to bodies, or pass body=None")
        names, robots = self._bodies if self._bodies else ([], [])
        if body not in names and body not in robots:
            known = sorted(set(names) | {r for r in robots if r})
            if not names and body in self.pieces:
                return          # a run without contact (no contacts piece): the body never touched anything
            raise ParameterError(f"no body {body!r} in the contacts of {self.pvd}; bodies: "
                                 f"{', '.join(known) or 'none (a run without contact)'}")

    def contact_force(self, body: Optional[str] = None) -> np.ndarray:
        """(n_frames, 3) total contact force (N, world frame) over the step that ended at each frame on
        ``body`` (a body's or a robot's name), or the sum of all contacts' ``force`` (on side B) when None."""
        if body is not None:
            self._check_body(body)
        out = np.zeros((len(self), 3))
        for i, c in enumerate(self._contact_frames()):
            if not len(c["force"]):
                continue
            if body is None:
                out[i] = c["force"].sum(0)
            elif self._bodies:
                on_b, on_a = self._body_mask(body, c["body_b"]), self._body_mask(body, c["body_a"])
                out[i] = c["force"][on_b].sum(0) - c["force"][on_a].sum(0)
        return out

    def stick_slip(self, body: Optional[str] = None) -> np.ndarray:
        """(n_frames, 2) number of sticking and of sliding contacts (of ``body``, a body's or a robot's
        name, on either side; all contacts when None) at each frame."""
        if body is not None:
            self._check_body(body)
        out = np.zeros((len(self), 2), int)
        for i, c in enumerate(self._contact_frames()):
            sel = np.ones(len(c["state"]), bool)
            if body is not None:
                sel = (self._body_mask(body, c["body_a"]) | self._body_mask(body, c["body_b"])) if self._bodies \
                    else np.zeros(len(c["state"]), bool)
            out[i] = [(c["state"][sel] == STICK).sum(), (c["state"][sel] == SLIP).sum()]
        return out

    # -- robots ------------------------------------------------------------------
    def joints(self, robot: str) -> dict[str, np.ndarray]:
        """The columns of ``OUT/<robot>_joints.csv`` (``io/robot_output.py``: time, per joint position,
        velocity and torque or force, end-effector contact force)."""
        path = self.out / f"{sanitize_name(robot)}_joints.csv"
        if not path.is_file():
            have = sorted(p.name[: -len("_joints.csv")] for p in self.out.glob("*_joints.csv"))
            raise ParameterError(f"no {path.name} in {self.out}; robots with joint output: {', '.join(have) or 'none'}")
        return _read_csv(path)

    # -- plotting ----------------------------------------------------------------
    def plot(self, contacts: Optional[str] = None, path: str | os.PathLike | None = None) -> "Figure":
        """``plot(self, contacts, path)``: see the module function ``plot``."""
        return plot(self, contacts=contacts, path=path)


def read(out: str | os.PathLike) -> RunResults:
    """The results of a run in folder ``out`` (or its ``run.pvd``): every frame with its time, pieces
    loaded on demand (``RunResults``). FemcontactError when ``out`` holds no ``run.pvd``."""
    return RunResults(out)


def plot(out: "str | os.PathLike | RunResults", contacts: Optional[str] = None,
         path: str | os.PathLike | None = None) -> "Figure":
    """A matplotlib Figure of a run against time: the contact force on body ``contacts`` (all contacts
    when None; x, y, z and magnitude, N), its sticking and sliding contact counts, and the contact
    solver's momentum error ``e_m`` per step when ``steps.csv`` reports it. Saved (atomically) to
    ``path`` when given (format from its suffix). Needs matplotlib (``pip install "femcontact[plot]"``)."""
    res = out if isinstance(out, RunResults) else read(out)
    Figure, FigureCanvasAgg = _figure_class()
    force, counts = res.contact_force(contacts), res.stick_slip(contacts)
    e_m = res.steps.get("e_m")
    show_em = e_m is not None and np.isfinite(e_m).any()
    fig = Figure(figsize=(7.0, 7.5 if show_em else 5.5), dpi=100, layout="constrained")  # no pyplot
    FigureCanvasAgg(fig)
    axes = fig.subplots(3 if show_em else 2, 1, sharex=True)
    who = f"on {contacts}" if contacts else "(all contacts)"
    ax = axes[0]
    for k, c in enumerate("xyz"):
        ax.plot(res.times, force[:, k], lw=1.2, label=f"$F_{c}$")
    ax.plot(res.times, np.linalg.norm(force, axis=1), "k--", lw=1.2, label="$|F|$")
    ax.set_ylabel("contact force (N)")
    ax.set_title(f"contact force {who}")
    ax.legend(fontsize="small", ncol=4)
    ax = axes[1]
    ax.step(res.times, counts[:, 0], where="post", label="stick")
    ax.step(res.times, counts[:, 1], where="post", label="slip")
    ax.set_ylabel("contacts")
    ax.legend(fontsize="small")
    if show_em:
        ax = axes[2]
        ok = np.isfinite(e_m) & (e_m > 0)
        ax.semilogy(res.steps["time"][ok], e_m[ok], ".", ms=3)
        ax.set_ylabel("momentum error $e_m$")
    axes[-1].set_xlabel("time (s)")
    if path is not None:
        _save(fig, path)
    return fig


def _figure_class():
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise FemcontactError('plotting needs matplotlib: pip install "femcontact[plot]" (or pip install '
                              'matplotlib)') from None
    return Figure, FigureCanvasAgg


def _save(fig, path: str | os.PathLike) -> None:
    """Save ``fig`` atomically to ``path`` (format from its suffix)."""
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower() or "png"
    import io

    buf = io.BytesIO()
    try:
        fig.savefig(buf, format=fmt)
    except ValueError as exc:
        raise ParameterError(f"cannot save a plot as {path.name!r}: {exc}") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, buf.getvalue())


def plot_history(values, path: str | os.PathLike | None = None, title: str = "", ylabel: str = "cost") -> "Figure":
    """A matplotlib Figure of an optimization's ``values`` per iteration (log scale; the uses of
    ``femcontact.diff``: scenes/sysid_cube.py, scenes/push_trajopt.py), saved to ``path`` when given."""
    Figure, FigureCanvasAgg = _figure_class()
    values = np.asarray(values, float)
    fig = Figure(figsize=(5.0, 3.5), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    ax.semilogy(np.arange(len(values)), np.maximum(values, np.finfo(float).tiny), "o-", ms=3)
    ax.set_xlabel("iteration")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize="small")
    if path is not None:
        _save(fig, path)
    return fig


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------

def add_plot_command(subparsers: "argparse._SubParsersAction") -> argparse.ArgumentParser:
    """Register ``plot OUT [--contacts BODY] [--save FILE]``; the handler is ``args.func``."""
    p = subparsers.add_parser(
        "plot", help="plot a run's contact force, stick/slip counts and momentum error against time",
        description="Plot the contact force on a body (or on all contacts), its sticking and sliding contact "
                    "counts and the contact solver's momentum error e_m (when OUT/steps.csv has it) against "
                    "time, from the run in folder OUT. Needs matplotlib (pip install \"femcontact[plot]\").")
    p.add_argument("out", metavar="OUT", help="the run's output folder (holding run.pvd)")
    p.add_argument("--contacts", default=None, metavar="BODY",
                   help="body (or robot) whose contacts to plot (default: all contacts)")
    p.add_argument("--save", default=None, metavar="FILE",
                   help="picture to write, e.g. forces.png or forces.pdf (default: OUT/contacts_<BODY>.png, "
                        "replaced if there)")
    p.set_defaults(func=_plot_main)
    return p


def _plot_main(args: argparse.Namespace) -> int:
    path = Path(args.save) if args.save else Path(args.out) / f"contacts_{sanitize_name(args.contacts or 'all')}.png"
    try:
        plot(args.out, contacts=args.contacts, path=path)
    except (FemcontactError, OSError) as exc:
        print(f"femcontact plot: error: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0

