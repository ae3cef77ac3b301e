"""The API reference (tools/build_api_docs.py, pdoc) builds from the docstrings without a warning, so it
cannot rot: a public module that stops importing, or a page that disappears, fails here in CI."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# page -> a name it must document (the reader's entry points, README and docs/tutorial.md)
PAGES = {
    "femcontact.html": "Scene",
    "femcontact/scene.html": "Scene.add_fem_body",
    "femcontact/simulator.html": "Simulator.run",
    "femcontact/spec.html": "Material",
    "femcontact/meshes.html": "box",
    "femcontact/geometry/shapes.html": "HalfSpace",
    "femcontact/kits/gripper.html": "ParallelGripper.set_grip_force",
    "femcontact/control.html": "Control",
    "femcontact/robots.html": "Robot",
    "femcontact/io.html": None,
    "femcontact/io/vtk.html": "SeriesWriter",
    "femcontact/sweep.html": "sweep",
    "femcontact/backend.html": "init",
    "femcontact/errors.html": "FemcontactError",
}


def test_api_reference_builds_without_warnings(tmp_path):
    out = tmp_path / "api"
    # a fresh process, as `python tools/build_api_docs.py` runs: pdoc imports every public module, which must
    # need no GPU: no FEMCONTACT_ARCH, and the tool fails if an import initialised a backend
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    env.pop("FEMCONTACT_ARCH", None)
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "build_api_docs.py"), str(out)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"build_api_docs failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    assert "Warn" not in proc.stderr and "Error" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    index = (out / "index.html").read_text(encoding="utf-8")
    for page, name in PAGES.items():
        path = out / page
        assert path.is_file(), f"no {page} in the API reference: {sorted(p.name for p in out.rglob('*.html'))}"
        assert f'href="{page}"' in index, f"index.html does not link {page}"
        if name is not None:
            assert f'id="{name}"' in path.read_text(encoding="utf-8"), f"{page} documents no {name}"
    # every page pdoc wrote is listed on the index (no orphan page), and the search index exists
    for path in out.rglob("*.html"):
        rel = path.relative_to(out).as_posix()
        assert rel == "index.html" or f'href="{rel}"' in index, f"{rel} is not linked from index.html"
    assert (out / "search.js").is_file()
