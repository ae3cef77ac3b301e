"""The interactive viewer (femcontact/io/viewer.py): `femcontact view OUT` served and loaded in headless Chromium,
the Jupyter path (the server on a running asyncio loop), units on the colour bar, contacts hidden and their
markers sized to the bodies, a missing 'view' extra.

The browser test runs wherever Chromium is installed (.ci/run installs it) and is skipped only where it is
not. Set FEMCONTACT_VIEWER_SCREENSHOT=PATH to keep its screenshot coloured by von_mises (docs/viewer.png was
made so).
"""
from __future__ import annotations

import asyncio
import io
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import meshio
import numpy as np
import pytest
from PIL import Image

from tests.helpers.browser import CHROMIUM, open_page
from femcontact.errors import FemcontactError
from femcontact.io import viewer as V
from femcontact.io.fields import field_label
from femcontact.io.vtk import SeriesWriter
from femcontact.meshes import box

ROOT = Path(__file__).resolve().parents[2]
ROD_RADIUS = 0.01


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """Four frames of a 0.2 m cube falling onto the ground beside a cable (radius 1 cm); the last frame has
    contacts under the cube and on the cable (with a force; ground on side A, as the simulator writes them)."""
    out = tmp_path_factory.mktemp("view")
    tm = box((0.2, 0.2, 0.2), 3)
    ground = meshio.Mesh(np.array([[-1, -1, 0], [1, -1, 0], [1, 1, 0], [-1, 1, 0]], float),
                         [("triangle", np.array([[0, 1, 2], [0, 2, 3]]))],
                         point_data={"obstacle": np.ones(4, np.int32)})
    s = np.linspace(-0.4, 0.4, 17)
    rod_pts = np.column_stack([s, np.full_like(s, 0.3), np.full_like(s, ROD_RADIUS)])
    rod = meshio.Mesh(rod_pts, [("line", np.column_stack([np.arange(16), np.arange(1, 17)]))],
                      point_data={"radius": np.full(17, ROD_RADIUS), "velocity": np.zeros((17, 3))},
                      cell_data={"bend": [np.linspace(0, 2, 16)]})
    with SeriesWriter(out) as w:
        for k in range(4):
            x = tm.vertices + [0, 0, 0.1 + 0.1 * (3 - k)]                  # on the ground in the last frame
            cube = meshio.Mesh(x, [("tetra", tm.tets)], point_data={"velocity": np.tile([0, 0, -1.0], (len(x), 1))},
                               cell_data={"von_mises": [np.linspace(0, 1e4 * (k + 1), tm.n_tets)]})
            under = x[np.isclose(x[:, 2], x[:, 2].min())]
            pts = np.vstack([under, rod_pts[::4] - [0, 0, ROD_RADIUS]]) if k == 3 else np.zeros((0, 3))
            on = np.r_[np.zeros(len(under)), np.ones(len(rod_pts[::4]))].astype(np.int32)[:len(pts)]
            contacts = meshio.Mesh(pts, [("vertex", np.arange(len(pts))[:, None])],
                                   point_data={"force": np.tile([0, 0, 2.0], (len(pts), 1)),
                                               "state": np.ones(len(pts), np.int32),
                                               "body_a": np.full(len(pts), -1, np.int32), "body_b": on},
                                   field_data={"body_names": np.array(["cube", "cable"]),
                                               "body_robots": np.array(["", ""])})
            w.write(0.1 * k, {"cube": cube, "cable": rod, "ground": ground, "contacts": contacts})
    return out


def test_units_on_the_colour_bar_labels():
    """The viewer's labels come from io/fields.py, the one units table of the package."""
    assert V.field_label is field_label and not hasattr(V, "FIELD_UNITS")
    assert field_label("von_mises") == "von_mises (Pa)"
    assert field_label("velocity", vector=True) == "velocity magnitude (m/s)"
    assert field_label("impulse", vector=True) == "impulse magnitude (N s)"
    assert field_label("gap") == "gap (m)" and field_label("force", True) == "force magnitude (N)"
    assert field_label("stretch") == "stretch (-)" and field_label("custom") == "custom"


def test_viewer_state_fields_bodies_markers_and_hidden_contacts(run_dir):
    v = V.Viewer(run_dir)
    assert len(v.frames) == 4
    assert v.bodies == ["cube", "cable"]                      # not the ground (an obstacle), not the contacts
    assert {"von_mises", "velocity", "force", "state", "bend", "radius"} <= set(v.fields)
    assert "obstacle" not in v.fields
    p = v.plotter

    def marker_depths():
        """How far the markers reach below the contacts (all at z = 0): under the cube (y < 0.2), on the cable."""
        m = p.actors["3:contacts"].GetMapper().GetInput()
        pts = np.asarray(m.GetPoints().GetData())
        return -pts[pts[:, 1] < 0.2, 2].min(), -pts[pts[:, 1] > 0.2, 2].min()

    # markers sized as `femcontact render` sizes them, to the body each contact touches: on the cable its
    # radius (1 cm), under the cube 4 % of its diagonal (1.39 cm), not to the scene's extent
    cube_marker = 0.04 * np.sqrt(3) * 0.2
    v.draw(3, field="von_mises")
    assert marker_depths() == pytest.approx((cube_marker, ROD_RADIUS), rel=0.02)
    bar = next(iter(p.scalar_bars.values()))
    assert bar.GetTitle() == "von_mises (Pa)"
    v.draw(3, marker=0.5)                                  # the page's slider scales them
    assert marker_depths() == pytest.approx((0.5 * cube_marker, 0.5 * ROD_RADIUS), rel=0.02)
    v.draw(3, field="velocity", contacts=False)
    assert "3:contacts" not in p.actors
    assert next(iter(p.scalar_bars.values())).GetTitle() == "velocity magnitude (m/s)"


def test_frame_and_follow_one_body(run_dir):
    v = V.Viewer(run_dir, body="cube", follow=True)
    p = v.plotter
    focus0 = np.asarray(p.camera_position[1])
    v.draw(3, body="cube", follow=True)
    v.draw(0, body="cube", follow=True)           # the cube is 0.3 m higher in frame 0
    focus1 = np.asarray(p.camera_position[1])
    assert focus1 - focus0 == pytest.approx([0, 0, 0.3], abs=1e-9)
    whole = V.Viewer(run_dir)                     # framing the cube puts the camera nearer than framing the scene

    def distance(q):
        return np.linalg.norm(np.subtract(q.camera_position[0], q.camera_position[1]))

    assert distance(p) < 0.7 * distance(whole.plotter)


def test_bad_inputs_say_what_to_do(run_dir, tmp_path, monkeypatch):
    with pytest.raises(FemcontactError, match="no result series .*femcontact run"):
        V.Viewer(tmp_path)
    with pytest.raises(FemcontactError, match="no piece has an array 'stress_xx'; available: .*von_mises"):
        V.Viewer(run_dir, field="stress_xx")
    with pytest.raises(FemcontactError, match="no body 'ball'.*bodies: cube, cable"):
        V.Viewer(run_dir, body="ball")
    monkeypatch.setitem(sys.modules, "trame_pyvista", None)       # the 'view' extra not installed
    with pytest.raises(V.ViewerUnavailable, match=r'pip install "femcontact\[view\]"'):
        V.Viewer(run_dir)
    from femcontact.cli import main

    assert main(["view", str(run_dir), "--no-browser"]) == 1
    assert main(["view", str(tmp_path), "--no-browser"]) == 1
    monkeypatch.delitem(sys.modules, "trame_pyvista")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(FemcontactError, match=f"cannot serve on port {port} .*another --port"):
            V.Viewer(run_dir).serve(port, open_browser=False)
    with pytest.raises(FemcontactError, match="port must be 1..65535, got 70000"):
        V.Viewer(run_dir).serve(70000, open_browser=False)


def test_jupyter_path_serves_on_the_running_loop(run_dir):
    """In a notebook view() runs beside the kernel's asyncio loop and the Viewer displays as an iframe; the
    play loop advances the frames there (the state a page would show)."""
    import aiohttp

    import femcontact

    async def main():
        v = femcontact.view(run_dir, field="von_mises")
        assert isinstance(v, V.Viewer) and v.port
        assert f'src="http://localhost:{v.port}/index.html' in v._repr_html_()
        for _ in range(100):
            try:
                async with aiohttp.ClientSession() as s, s.get(v.url + "index.html") as r:
                    page = r.status, await r.text()
                break
            except aiohttp.ClientConnectorError:
                await asyncio.sleep(0.1)
        else:
            raise AssertionError("the viewer's server did not start on the running loop")
        state = v._server.state
        seen = {state.frame}
        with state:
            state.playing = True
        for _ in range(100):
            await asyncio.sleep(0.05)
            seen.add(state.frame)
            if len(seen) == 4:
                break
        with state:
            state.playing = False
        return page, seen

    (status, text), seen = asyncio.run(main())
    assert status == 200 and "<html" in text.lower()
    assert seen == {0, 1, 2, 3}, "play did not go round the frames"


def test_new_frames_of_a_run_still_writing_are_picked_up(tmp_path):
    tm = box((0.1, 0.1, 0.1), 2)

    def frame(k):
        return {"cube": meshio.Mesh(tm.vertices + [0, 0, 0.1 * k], [("tetra", tm.tets)])}

    with SeriesWriter(tmp_path) as w:
        w.write(0.0, frame(0))
        w.write(0.1, frame(1))
    v = V.Viewer(tmp_path)
    assert len(v.frames) == 2 and not v._reload()
    with SeriesWriter(tmp_path, append=True) as w:
        w.write(0.2, frame(2))
    assert v._reload() and len(v.frames) == 3
    v.draw(2)
    assert np.asarray(v.plotter.actors["0:cube"].GetBounds())[5] == pytest.approx(0.25)


def _wait_port(port: int, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"femcontact view exited ({proc.returncode}): {proc.stdout.read()}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"femcontact view did not listen on port {port} in {timeout:g} s")


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium); "
                                             ".ci/run installs it")
def test_view_command_page_in_headless_chromium(run_dir, tmp_path):
    """`femcontact view OUT` served, the page loaded in headless Chromium: the screenshot shows the cube in its
    body colour in the middle of the view and the red contact markers; colouring by von_mises and hiding the
    contacts change the picture; the play button advances the frames."""
    port = V.free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "femcontact.cli", "view", str(run_dir), "--port", str(port),
                             "--no-browser"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    image = "[...document.images].find(e => e.src.startsWith('blob:'))"     # the streamed view
    play = "document.querySelector('button[title=\"play / pause\"]').click()"

    async def session():
        async with open_page(f"http://localhost:{port}/", size=(1280, 800), timeout=60) as page:
            await page.wait(f"document.body.innerText.includes('colour by') && {image} !== undefined && "
                            f"{image}.naturalWidth > 200", "the rendered view and the controls")
            await asyncio.sleep(1.0)
            first = await page.screenshot()
            text = await page.eval("document.body.innerText")
            shots = []
            for change, what in (("window.trame.state.set('field', 'von_mises')", "colouring by von_mises"),
                                 ("document.querySelector('input[type=checkbox]').click()", "hiding the contacts")):
                src = await page.eval(f"{image}.src")
                await page.eval(change)
                await page.wait(f"{image}.src !== {src!r}", f"a new image after {what}")
                await asyncio.sleep(2.0)              # the image stream's re-sends (io/viewer.py: push)
                shots.append(await page.screenshot())
            assert await page.eval("window.trame.state.get('contacts')") is False
            await page.eval(play)                     # from the last frame round to the first ones
            await page.wait("document.body.innerText.includes('frame 2 / 4')", "frame 2 after play")
            await page.eval(play)
            return first, text, *shots

    try:
        _wait_port(port, proc)
        png, text, png_field, png_hidden = asyncio.run(session())
    finally:
        proc.terminate()
        try:
            out, _ = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
    assert proc.returncode in (0, -15, 143), out
    assert f"at http://localhost:{port}/" in out
    for name, data in (("viewer.png", png), ("viewer_field.png", png_field), ("viewer_hidden.png", png_hidden)):
        (tmp_path / name).write_bytes(data)
    if os.environ.get("FEMCONTACT_VIEWER_SCREENSHOT"):
        shutil.copyfile(tmp_path / "viewer_field.png", os.environ["FEMCONTACT_VIEWER_SCREENSHOT"])
    for label in ("colour by", "contacts", "marker", "body", "follow the body", "frame 4 / 4"):
        assert label in text

    def rgb(data):
        img = np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).astype(int)
        assert img.shape == (800, 1280, 3)
        return img[..., 0], img[..., 1], img[..., 2]

    view = (slice(60, 770), slice(270, 1260))                     # right of the side panel, below the toolbar
    centre = (slice(60 + 175, 770 - 175), slice(270 + 150, 1012 - 150))   # of the bodies' part: the left 3/4
    r, g, b = rgb(png)
    cube_blue = (b - r > 40) & (b > 90)                           # the first body colour #6f9fd8, shaded
    marker_red = (r - g > 80) & (r - b > 60)                      # contact markers #d62728
    assert cube_blue[view].mean() > 0.01, "no body in its colour in the view"
    assert cube_blue[centre].mean() > 0.02, "the body is not in the middle of its part of the view"
    assert marker_red[view].sum() > 20, "no contact markers drawn"
    r, g, b = rgb(png_field)
    assert ((r > 180) & (g > 180) & (b < 100))[view].sum() > 50, "the cube is not coloured by von_mises (yellow top)"
    assert ((r - g > 80) & (r - b > 60))[view].sum() > 20, "no contact markers beside the coloured cube"
    r, g, b = rgb(png_hidden)
    assert ((r > 180) & (g > 180) & (b < 100))[view].sum() > 50
    assert ((r - g > 80) & (r - b > 60))[view].sum() < 5, "contact markers drawn though hidden"


def test_run_view_without_the_extra_refuses_before_running(tmp_path, monkeypatch, capsys):
    from femcontact.cli import main

    monkeypatch.setitem(sys.modules, "trame", None)
    rc = main(["run", str(ROOT / "tests/helpers/resume_scene.py"), "--steps", "1", "--out", str(tmp_path / "o"), "--view"])
    assert rc == 1
    assert 'pip install "femcontact[view]"' in capsys.readouterr().err
    assert not (tmp_path / "o" / "run.pvd").exists()            # refused before anything ran


@pytest.mark.slow
def test_run_view_serves_the_finished_run(tmp_path):
    """`femcontact run SCENE --view` runs, then serves its output folder until stopped."""
    import urllib.request

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("DISPLAY", None)
    proc = subprocess.Popen([sys.executable, "-m", "femcontact.cli", "run", str(ROOT / "tests/helpers/resume_scene.py"),
                             "--steps", "2", "--out", str(tmp_path / "o"), "--no-progress", "--view"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if "femcontact view: serving" in line:
                break
        else:
            raise AssertionError("".join(lines))
        port = int(line.split("http://localhost:")[1].split("/")[0])
        _wait_port(port, proc)
        with urllib.request.urlopen(f"http://localhost:{port}/index.html", timeout=10) as r:
            assert r.status == 200
        from femcontact.io.vtk import read_pvd_entries

        n = len({e["time"] for e in read_pvd_entries(tmp_path / "o" / "run.pvd")})
        assert n >= 2 and f"({n} frames)" in line
    finally:
        proc.terminate()
        proc.communicate(timeout=20)
