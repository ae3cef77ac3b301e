"""Render the README gallery: run each scene of ``GALLERY`` for its steps with ``femcontact run`` and
draw its last frame with ``femcontact render`` into docs/gallery/<scene>.png.

    python tools/gallery.py [--scenes conveyor_belt steel_sphere ...] [--out docs/gallery] [--size 360 270]

Runs in subprocesses exactly as a user would (the CLI), so a picture shows what a user gets.
"""
import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# scene: (run options, render options)
GALLERY = {
    "conveyor_belt": (["--steps", "150", "--every", "10"], []),
    "steel_sphere": (["--steps", "150", "--every", "10"], []),
    "painleve_rod": (["--steps", "150", "--every", "10"], ["--camera", "xz"]),
    "spring_cylinder": (["--steps", "20"], []),
    "clutter": (["--steps", "60", "--every", "10"], []),
    "cube_stack": (["--steps", "30", "--every", "10"], ["--scalars", "von_mises"]),
    "capstan": (["--steps", "50", "--every", "10"], []),
    "panda_hold": (["--steps", "5"], []),
    "panda_mat_fold": (["--steps", "250", "--every", "10"], ["--camera", "xz"]),    # folded: the far half laid over
    "panda_soft_ball": (["--steps", "150", "--every", "10"], ["--camera", "xz"]),   # the ball lifted 10 cm
    "panda_cable_winding": (["--steps", "240", "--every", "20"], []),                # half wound: hand, cable, cylinder
    "grasp_stress": (["--steps", "1050", "--every", "10"], ["--camera", "yz", "--frame", "75"]),  # rocking at 1.5 s
    "slip_control": (["--steps", "1300", "--every", "20"], ["--camera", "yz"]),    # one stair down: pitched ~14° at 6.5 s
    "soft_gripper": (["--steps", "300", "--every", "10"], ["--camera", "xz", "--scalars", "von_mises"]),  # dragged: sheared
    "anisotropic_box": (["--steps", "100", "--every", "10"], []),
    "symmetric_grip": (["--steps", "50", "--every", "5"], ["--camera", "xz", "--scalars", "von_mises"]),  # squeezed ball
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenes", nargs="+", default=list(GALLERY), choices=list(GALLERY))
    ap.add_argument("--out", default=str(ROOT / "docs" / "gallery"))
    ap.add_argument("--size", nargs=2, type=int, default=(360, 270))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cli = [sys.executable, "-m", "femcontact"]
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.scenes:
            run_opts, render_opts = GALLERY[name]
            run_dir = Path(tmp) / name
            subprocess.run([*cli, "run", str(ROOT / "scenes" / f"{name}.py"), "--out", str(run_dir), "--no-progress",
                            *run_opts], check=True)
            png = out / f"{name}.png"
            subprocess.run([*cli, "render", str(run_dir / "run.pvd"), str(png), "--size", *map(str, args.size),
                            *render_opts], check=True)
            print(f"{name}: {png} ({png.stat().st_size // 1024} KiB)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
