"""VTK output of a run: .pvd + .vtu readable by meshio and PyVista with fields and times."""
import meshio
import numpy as np
import pytest
import pyvista as pv

import femcontact as fc
from femcontact.errors import ParameterError
from femcontact.io.vtk import read_pvd_entries


def test_run_writes_a_readable_time_series(tmp_path):
    scene = fc.Scene(dt=1e-2, gravity=(0, 0, -9.81))
    scene.add_fem_body(fc.meshes.box((0.1, 0.1, 0.1), 2), fc.Material(1e5, 0.3, 1000.0), name="cube")
    sim = fc.Simulator(scene)
    summary = sim.run(steps=10, out=tmp_path / "run1", every=5)
    pvd = tmp_path / "run1" / "run.pvd"
    assert summary.output == pvd and pvd.is_file()
    entries = read_pvd_entries(pvd)
    np.testing.assert_allclose([e["time"] for e in entries], [0.0, 0.05, 0.1], atol=1e-12)
    last = meshio.read(pvd.parent / entries[-1]["file"])
    assert last.points.shape == (27, 3) and last.cells_dict["tetra"].shape == (48, 4)
    np.testing.assert_allclose(last.points, sim.body_positions("cube"), atol=1e-12)
    assert {"displacement", "velocity"} <= set(last.point_data) and "von_mises" in last.cell_data
    np.testing.assert_allclose(last.point_data["displacement"][:, 2], -0.5 * 9.81 * 0.1**2, rtol=1e-9)
    reader = pv.get_reader(str(pvd))
    np.testing.assert_allclose(reader.time_values, [0.0, 0.05, 0.1], atol=1e-12)
    reader.set_active_time_value(reader.time_values[-1])
    mesh = reader.read()[0]
    assert mesh.n_points == 27 and "velocity" in mesh.point_data


def test_rerun_into_the_same_folder_replaces_old_frames(tmp_path):
    """Only when asked (overwrite=True): unasked, a rerun is refused (issue 29; test_output_safety.py)."""
    scene = fc.Scene(dt=1e-2)
    scene.add_fem_body(fc.meshes.box((0.1, 0.1, 0.1), 1), fc.Material(1e5, 0.3, 1000.0), name="cube")
    fc.Simulator(scene).run(steps=6, out=tmp_path, every=1)
    with pytest.raises(ParameterError, match="holds an earlier run"):
        fc.Simulator(scene).run(steps=2, out=tmp_path, every=1)
    assert len(read_pvd_entries(tmp_path / "run.pvd")) == 7
    fc.Simulator(scene).run(steps=2, out=tmp_path, every=1, overwrite=True)
    assert len(read_pvd_entries(tmp_path / "run.pvd")) == 3


def _sliding_box(kind: str) -> fc.Simulator:
    scene = fc.Scene(dt=1e-2, gravity=(0, 0, -9.81), solver="lagged", integrator="euler")
    if kind == "fem":
        scene.add_fem_body(fc.meshes.box((0.1,) * 3, resolution=2), fc.Material(1e6, 0.3, 1000.0),
                           position=(0, 0, 0.05), velocity=(2.0, 0, 0), name="box")
    else:
        scene.add_rigid_body(fc.shapes.Box((0.05,) * 3), density=1000.0, position=(0, 0, 0.05),
                             velocity=(2.0, 0, 0), name="box")
    scene.add_obstacle(fc.shapes.HalfSpace(normal=(0, 0, 1)), friction=0.2, name="ground")
    return fc.Simulator(scene)


def test_contact_points_are_drawn_where_the_sliding_body_is():
    """A box sliding at ~1.8 m/s (dt 10 ms): its contacts were detected at the step's start, but
    the frame shows them with the box at the step's end, under its bottom face (they lagged 18 mm)."""
    for kind in ("fem", "rigid"):
        sim = _sliding_box(kind)
        sim.run(steps=10)
        pieces = sim.frame_pieces()
        points, body = pieces["contacts"].points, pieces["box"].points
        bottom = body[body[:, 2] < body[:, 2].min() + 1e-3]
        assert len(points) == 9, kind
        detected = sim.contacts.to_numpy()["point"]
        assert bottom[:, 0].mean() - detected[:, 0].mean() > 0.015, kind        # the lag being removed
        np.testing.assert_allclose(points[:, 0].mean(), bottom[:, 0].mean(), atol=1e-6, err_msg=kind)
        np.testing.assert_allclose([points[:, 0].min(), points[:, 0].max()], [bottom[:, 0].min(), bottom[:, 0].max()],
                                   atol=1e-6, err_msg=kind)
        np.testing.assert_allclose(points[:, 2], 0.0, atol=1e-3, err_msg=kind)
