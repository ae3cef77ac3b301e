"""Offscreen rendering of a .pvd series to pictures and movies.

These tests do not skip when offscreen rendering is impossible: they fail with
the reason (and what to install) from ensure_offscreen().
"""
from __future__ import annotations

import argparse

import meshio
import numpy as np
import pytest
from PIL import Image

from femcontact.errors import ParameterError
from femcontact.io.render import add_render_command, ensure_offscreen, render_series
from femcontact.io.vtk import SeriesWriter, read_pvd_entries
from femcontact.meshes import box


@pytest.fixture(scope="module")
def series(tmp_path_factory):
    out = tmp_path_factory.mktemp("render")
    tm = box((1, 0.2, 0.2), 4)
    floor = meshio.Mesh(np.array([[-1, -1, -0.3], [1, -1, -0.3], [1, 1, -0.3], [-1, 1, -0.3]], float),
                        [("triangle", np.array([[0, 1, 2], [0, 2, 3]]))])
    s = np.linspace(-0.5, 0.5, 12)
    with SeriesWriter(out) as w:
        for k in range(3):
            u = np.zeros_like(tm.vertices)
            u[:, 2] = -0.1 * k * (tm.vertices[:, 0] + 0.5) ** 2
            body = meshio.Mesh(tm.vertices + u, [("tetra", tm.tets)],
                               point_data={"displacement": u, "velocity": u * 10},
                               cell_data={"von_mises": [np.linspace(0, 1e5 * (k + 1), tm.n_tets)]})
            rod = meshio.Mesh(np.column_stack([s, np.full_like(s, 0.4), 0.1 * np.sin(3 * s + k)]),
                              [("line", np.column_stack([np.arange(11), np.arange(1, 12)]))],
                              point_data={"radius": np.full(12, 0.02)})
            pieces = {"beam": body, "floor": floor, "rod": rod}
            if k:  # contacts appear after the first frame
                pieces["contacts"] = meshio.Mesh((tm.vertices + u)[:k * 3], [])
            w.write(0.05 * k, pieces)
    return w.pvd_path


def test_offscreen_rendering_works_here():
    assert ensure_offscreen() in {"display", "egl", "osmesa", "xvfb", "user"}


def _assert_nontrivial(path, size):
    assert path.is_file() and path.stat().st_size > 5_000
    img = np.asarray(Image.open(path).convert("RGB"))
    assert img.shape[:2] == (size[1], size[0])
    assert len(np.unique(img.reshape(-1, 3), axis=0)) > 50  # not a single colour
    assert (img.reshape(-1, 3) != 255).any(axis=1).mean() > 0.02  # something drawn on white


def test_png_of_last_and_first_frame(series, tmp_path):
    out = render_series(series, tmp_path / "last.png", scalars="von_mises", window_size=(400, 300))
    _assert_nontrivial(out, (400, 300))
    first = render_series(series, tmp_path / "first.png", frame=0, window_size=(400, 300))
    _assert_nontrivial(first, (400, 300))
    a = np.asarray(Image.open(out).convert("RGB"), dtype=int)
    b = np.asarray(Image.open(first).convert("RGB"), dtype=int)
    assert np.abs(a - b).mean() > 1.0  # the beam moved / got coloured
    assert not list(tmp_path.glob(".tmp-*"))


def test_gif_of_three_frames(series, tmp_path):
    out = render_series(series, tmp_path / "movie.gif", scalars="displacement", fps=10,
                        window_size=(320, 240))
    with Image.open(out) as im:
        assert im.n_frames == 3 and im.size == (320, 240)
    assert render_series(series, tmp_path / "every2.gif", every=2, window_size=(160, 120)).is_file()
    with Image.open(tmp_path / "every2.gif") as im:
        assert im.n_frames == 2


def test_mp4_of_three_frames(series, tmp_path):
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg", reason="mp4 needs the optional imageio-ffmpeg")
    out = render_series(series, tmp_path / "movie.mp4", fps=10, window_size=(321, 241), camera="xz")
    reader = imageio_ffmpeg.read_frames(str(out))
    meta = next(reader)
    assert tuple(meta["size"]) == (320, 240)
    assert sum(1 for _ in reader) == 3


def test_bad_requests_say_what_is_wrong(series, tmp_path):
    with pytest.raises(ParameterError, match="available"):
        render_series(series, tmp_path / "x.png", scalars="no_such_array")
    with pytest.raises(ParameterError, match="out of range"):
        render_series(series, tmp_path / "x.png", frame=7)
    with pytest.raises(ParameterError, match="picture"):
        render_series(series, tmp_path / "x.stl")
    with pytest.raises(FileNotFoundError):
        render_series(tmp_path / "missing.pvd", tmp_path / "x.png")


def test_cli_subcommand(series, tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="femcontact")
    add_render_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["render", str(series), str(tmp_path / "cli.png"), "--frame", "-1",
                              "--scalars", "von_mises", "--size", "320", "240"])
    assert args.func(args) == 0
    assert (tmp_path / "cli.png").stat().st_size > 5_000
    args = parser.parse_args(["render", str(series), str(tmp_path / "bad.png"), "--scalars", "nope"])
    assert args.func(args) == 1
    assert "nope" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser.parse_args(["render", "--help"])
    assert "--every" in capsys.readouterr().out


def test_missing_opengl_gives_a_clear_error(tmp_path):
    """With no usable EGL/OSMesa/display the error names the packages to install (checked in a child)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "VTK_DEFAULT_OPENGL_WINDOW")}
    env["__EGL_VENDOR_LIBRARY_FILENAMES"] = str(tmp_path / "no_vendor.json")  # hide Mesa's EGL
    env["PATH"] = str(tmp_path)  # hide Xvfb
    code = ("from femcontact.io.render import ensure_offscreen, RenderError\n"
            "try:\n    print('OK', ensure_offscreen())\n"
            "except RenderError as e:\n    print('ERR', e)\n")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    if r.stdout.startswith("OK"):  # e.g. OSMesa installed: still fine
        assert "osmesa" in r.stdout
    else:
        assert "apt-get install libegl1" in r.stdout and "Tried:" in r.stdout


def test_camera_frames_the_bodies_not_the_ground(tmp_path):
    """A small rigid ball on a half-space: the picture frames the ball (its shaded surface fills
    a good part of the image), not the ground's patch."""
    import femcontact as fc

    scene = fc.Scene(solver="cond", dt=1e-2)
    scene.add_obstacle(fc.shapes.HalfSpace(), name="ground")
    scene.add_rigid_body(fc.shapes.Sphere(0.02), density=1000.0, position=(0, 0, 0.02), name="ball")
    sim = fc.Simulator(scene)
    sim.run(steps=2, out=tmp_path / "run")
    png = render_series(tmp_path / "run" / "run.pvd", tmp_path / "ball.png", window_size=(320, 240), camera="xz")
    img = np.asarray(Image.open(png).convert("RGB")).astype(float)
    blue = (img[..., 2] > img[..., 0] + 40) & (img[..., 2] > img[..., 1] + 10)     # the ball's colour
    assert blue.mean() > 0.03, blue.mean()


def _red(img):
    """The contact markers' red (#d62728, shaded)."""
    r, g, b = (img[..., k].astype(float) for k in range(3))
    return (r > 100) & (g < 0.45 * r) & (b < 0.45 * r)


def _load_rgb(path):
    return np.asarray(Image.open(path).convert("RGB"))


def test_colour_bar_title_names_the_field_and_its_unit(series, tmp_path, monkeypatch):
    import pyvista as pv

    titles = []
    add_mesh = pv.Plotter.add_mesh

    def spy(self, *args, **kw):
        if kw.get("show_scalar_bar"):
            titles.append(kw["scalar_bar_args"]["title"])
        return add_mesh(self, *args, **kw)

    monkeypatch.setattr(pv.Plotter, "add_mesh", spy)
    render_series(series, tmp_path / "vm.png", scalars="von_mises", window_size=(320, 240))
    render_series(series, tmp_path / "v.png", scalars="velocity", window_size=(320, 240))
    assert titles == ["von_mises (Pa)", "velocity magnitude (m/s)"]


def test_hide_contacts_and_other_pieces(series, tmp_path):
    shown = _load_rgb(render_series(series, tmp_path / "shown.png", window_size=(400, 300)))
    hidden = _load_rgb(render_series(series, tmp_path / "hidden.png", window_size=(400, 300), hide=["contacts"]))
    assert _red(shown).sum() > 20 and _red(hidden).sum() == 0          # the markers, and only they, went
    assert np.abs(shown.astype(int) - hidden.astype(int)).sum(axis=2).astype(bool).mean() < 0.05
    no_rod = _load_rgb(render_series(series, tmp_path / "norod.png", window_size=(400, 300),
                                     hide=["contacts", "rod"]))
    def green(im):                         # the rod's colour (#7dbf7a, shaded)
        r, g, b = (im[..., k].astype(int) for k in range(3))
        return (g > r + 30) & (g > b + 30)

    assert green(hidden).sum() > 100 and green(no_rod).sum() == 0
    with pytest.raises(ParameterError, match="no such piece; pieces: beam"):
        render_series(series, tmp_path / "x.png", hide=["nothing"])


def _two_bodies(out):
    """A 1 m FEM slab and, 0.8 m beside it, a 2 cm rigid-like sphere surface; a contact on each."""
    import pyvista as pv

    slab = box((1.0, 1.0, 0.1), 3)
    ball = pv.Sphere(radius=0.01, center=(1.3, 0.0, 0.01))
    contacts = meshio.Mesh(np.array([[0, 0, -0.05], [1.3, 0, 0.0]]), [],
                           point_data={"body_a": np.array([-1, -1], np.int32), "body_b": np.array([0, 1], np.int32)},
                           field_data={"body_names": np.array(["slab", "ball"]), "body_robots": np.array(["", ""])})
    with SeriesWriter(out) as w:
        w.write(0.0, {"slab": meshio.Mesh(slab.vertices, [("tetra", slab.tets)]),
                      "ball": meshio.Mesh(np.asarray(ball.points), [("triangle", ball.faces.reshape(-1, 4)[:, 1:])]),
                      "contacts": contacts})
    return w.pvd_path


def _orange(img):
    """The second piece's colour (#e39b5b, shaded)."""
    r, g, b = (img[..., k].astype(int) for k in range(3))
    return (r > 90) & (r > g + 25) & (g > b + 15)


def test_focus_frames_one_body(tmp_path):
    pvd = _two_bodies(tmp_path / "run")
    wide = _load_rgb(render_series(pvd, tmp_path / "wide.png", window_size=(320, 240)))
    near = _load_rgb(render_series(pvd, tmp_path / "near.png", window_size=(320, 240), focus="ball"))
    assert _orange(wide).mean() < 0.01, _orange(wide).mean()            # both bodies framed: a dot
    assert _orange(near).mean() > 0.15, _orange(near).mean()            # the ball fills the picture
    with pytest.raises(ParameterError, match="--focus 'nobody'"):
        render_series(pvd, tmp_path / "x.png", focus="nobody")


def test_contact_markers_are_sized_to_the_bodies_they_touch(tmp_path):
    """On the 2 cm ball a marker is 4 % of its diagonal; on the 1 m slab 0.05 m, half its thickness; on a
    4 mm cable its radius (drawn at 0.008 of the scene's diagonal the cable's contacts looked like a
    second, thicker cable)."""
    import pyvista as pv

    from femcontact.io.render import _marker_radii

    loaded = [(e, pv.read(e["file"])) for e in read_pvd_entries(_two_bodies(tmp_path / "run"))]
    by_name = {e["name"]: ds for e, ds in loaded}
    r = _marker_radii(loaded, by_name["contacts"], 1.0)
    ball_diag = float(np.linalg.norm(np.diff(np.asarray(by_name["ball"].bounds).reshape(3, 2), axis=1)))
    np.testing.assert_allclose(r, [0.05, 0.04 * ball_diag], rtol=1e-9)

    s = np.linspace(0, 1, 41)
    cable = meshio.Mesh(np.column_stack([s, 0 * s, 0.004 + 0 * s]), [("line", np.column_stack([np.arange(40), np.arange(1, 41)]))],
                        point_data={"radius": np.full(41, 0.004)})
    cps = np.column_stack([s, 0 * s, 0 * s])
    contacts = meshio.Mesh(cps, [], point_data={"body_a": np.full(41, -1, np.int32), "body_b": np.zeros(41, np.int32)},
                           field_data={"body_names": np.array(["cable"]), "body_robots": np.array([""])})
    with SeriesWriter(tmp_path / "cable") as w:
        w.write(0.0, {"cable": cable, "contacts": contacts})
    img = _load_rgb(render_series(w.pvd_path, tmp_path / "cable.png", window_size=(640, 480), camera="xz"))
    blue = img[..., 2].astype(int) > img[..., 0].astype(int) + 40
    assert _red(img).sum() > 50 and _red(img).sum() < 0.6 * blue.sum(), (_red(img).sum(), blue.sum())


def test_default_camera_frames_the_object_not_the_robot(tmp_path):
    """A robot's link pieces (``arm/...``, 1 m) and the 2 cm ball it holds: the picture frames the ball,
    the robot is drawn faded around it; --focus arm frames the robot."""
    import pyvista as pv

    link = pv.Box(bounds=(-0.5, 0.5, -0.05, 0.05, 0.02, 1.0)).triangulate()
    ball = pv.Sphere(radius=0.01, center=(0.6, 0.0, 0.01))
    tri = lambda m: meshio.Mesh(np.asarray(m.points), [("triangle", m.faces.reshape(-1, 4)[:, 1:])])  # noqa: E731
    with SeriesWriter(tmp_path / "run") as w:
        w.write(0.0, {"arm/base": tri(link), "ball": tri(ball)})
    img = _load_rgb(render_series(w.pvd_path, tmp_path / "ball.png", window_size=(320, 240)))
    assert _orange(img).mean() > 0.08, _orange(img).mean()
    img = _load_rgb(render_series(w.pvd_path, tmp_path / "arm.png", window_size=(320, 240), focus="arm"))
    assert _orange(img).mean() < 0.01


def test_cli_hide_and_focus(series, tmp_path):
    parser = argparse.ArgumentParser(prog="femcontact")
    add_render_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["render", str(series), str(tmp_path / "f.png"), "--hide", "contacts,floor",
                              "--hide", "rod", "--focus", "beam", "--size", "160", "120"])
    assert args.func(args) == 0 and (tmp_path / "f.png").is_file()
