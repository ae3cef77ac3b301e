"""The ``femcontact`` command: run scenes, inspect and convert meshes, render results, benchmark."""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import time
from pathlib import Path

from .errors import FemcontactError
from .scene_script import load_scene_module, scene_hash

_IMPORTED_AT = time.perf_counter()
RUNTIME_COMMANDS = ("run", "sweep", "bench")      # the commands that run kernels take --runtime


def process_start() -> float:
    """When this process started, on the ``time.perf_counter`` clock: from ``/proc/self/stat`` (field 22,
    clock ticks after boot) and ``/proc/uptime``; where they cannot be read, when this module was imported."""
    try:
        stat = Path("/proc/self/stat").read_text()
        ticks = int(stat[stat.rindex(")") + 2:].split()[19])     # field 22; the name in (...) may hold spaces
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        age = uptime - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return _IMPORTED_AT
    return time.perf_counter() - max(age, 0.0)


def check_run_args(args: argparse.Namespace) -> Path:
    """Refuse bad ``run`` options before anything is compiled or run; return the output folder.

    --steps and --every must be integers >= 1, --duration and --dt positive numbers, the scene
    script must exist, and the output folder must be writable (made by the run's first file, so a
    run that fails before it leaves no empty folder)."""
    from .spec.validation import positive

    if args.steps is not None and args.steps < 1:
        raise FemcontactError(f"--steps must be at least 1, got {args.steps}; give the number of steps to run, "
                              "or leave it out to run the scene's duration")
    if args.every is not None and args.every < 1:
        raise FemcontactError(f"--every must be at least 1 (a frame every K steps), got {args.every}")
    if (getattr(args, "unconverged_stop", None) or 0) < 0:
        raise FemcontactError(f"--unconverged-stop must be a number of steps (0: never stop), got {args.unconverged_stop}")
    if args.checkpoint_every is not None and args.checkpoint_every < 1:
        raise FemcontactError(f"--checkpoint-every must be a positive number of steps, got {args.checkpoint_every}")
    if args.duration is not None:
        positive(args.duration, "--duration (simulated time in s)")
    if args.dt is not None:
        positive(args.dt, "--dt (step size in s)")
    if not Path(args.scene).is_file():
        raise FemcontactError(f"scene script {args.scene!r} not found; give the path of a .py file that "
                              "defines build() -> femcontact.Scene (examples in scenes/)")
    from .io.vtk import check_output_dir

    out = Path(args.out) if args.out else Path("out") / Path(args.scene).stem
    if getattr(args, "resume", None) is None and not getattr(args, "overwrite", False):
        refuse_earlier_run(out)
    return check_output_dir(out, what="--out", create=False)


def refuse_earlier_run(out: Path) -> None:
    """A new run into a folder that holds an earlier run's series is refused, never written over: the
    message says what is there and the three ways on (another --out, --overwrite, --resume)."""
    from .io.vtk import earlier_run

    held = earlier_run(out)
    if held is None:
        return
    raise FemcontactError(f"--out {str(out)!r} holds an earlier run ({held}); nothing was changed. "
                          f"Give another --out, --overwrite to replace that run, or --resume {out} to continue "
                          "it (a run saved with --checkpoint-every)")


def cmd_run(args: argparse.Namespace) -> int:
    from . import backend
    from .scene import Scene
    from .convergence import DEFAULT_UNCONVERGED_STOP
    from .simulator import Simulator
    from .spec.validation import positive

    start = process_start()
    resume = _resume_options(args)          # --resume OUT: the stored options of that run fill the gaps
    out = check_run_args(args)              # bad options, unwritable or full --out: refused before anything runs
    if getattr(args, "view", False):        # a missing 'view' extra is said now, not after the run
        from .io.viewer import require_viewer

        require_viewer()
    if backend.cache_is_warm():
        print(f"femcontact: loading kernels from {backend.cache_dir()}", flush=True)
    else:
        print("femcontact: compiling kernels (first run of this femcontact version on this runtime and machine; "
              f"later runs load them from {backend.cache_dir()})", flush=True)
    cfg = backend.init(args.arch, args.precision, deterministic=args.deterministic or None)
    module = load_scene_module(args.scene)
    scene = module.build(**build_params(args, module.build))
    if not isinstance(scene, Scene):
        raise FemcontactError(f"build() in {args.scene} returned {type(scene).__name__}, not a femcontact.Scene; "
                              "end build() with 'return scene'")
    if args.dt is not None:
        scene.dt = positive(args.dt, "--dt")
    if args.solver is not None:
        scene.solver = args.solver          # checked by the Scene
    if args.stiction is not None:
        scene.stiction = args.stiction
    stop = getattr(args, "unconverged_stop", None)
    sim = Simulator(scene, unconverged_stop=DEFAULT_UNCONVERGED_STOP if stop is None else stop or None)
    recorded = bool(resume or args.checkpoint_every)
    steps = _resume_or_record(args, sim, out, cfg) if recorded else args.steps
    if steps is not None and args.steps is None:
        args.duration = None
    choice = f" ({sim.solver_choice})" if sim.solver_choice else ""
    print(f"femcontact: {args.scene} on {backend.describe()}, {sim.model.n_dofs} DOF, dt {scene.dt:g} s, "
          f"integrator {scene.integrator}, solver {sim.contact_solver.name}{choice}, stiction {scene.stiction}",
          flush=True)
    step0 = sim.state.step

    def first_step(s: Simulator) -> None:
        if s.state.step == step0 + 1:
            print(f"\nfemcontact: first step done {time.perf_counter() - start:.1f} s after start", flush=True)

    try:
        with convergence_warnings_on_screen():
            summary = sim.run(duration=args.duration, steps=steps, out=out, every=args.every,
                              progress=not args.no_progress, callback=first_step,
                              checkpoint_every=args.checkpoint_every, append=resume, overwrite=bool(args.overwrite))
    except KeyboardInterrupt:
        print(interrupted(args, sim, out), file=sys.stderr, flush=True)
        return 130
    finally:
        _record_convergence(args, sim, out, cfg, recorded)
    print(summary)
    if getattr(args, "view", False):
        from .io.viewer import serve_from_args

        return serve_from_args(out, argparse.Namespace(port=None, host="localhost", no_browser=False, field=None,
                                                       body=None, hide_contacts=False))
    return 0


@contextlib.contextmanager
def convergence_warnings_on_screen():
    """Show a run's ``ConvergenceWarning`` (given once per run, ``femcontact.convergence``) as one line
    ``femcontact: warning: ...`` on stderr, above the progress bar; other warnings as Python shows them."""
    import warnings

    from .convergence import ConvergenceWarning

    with warnings.catch_warnings():
        shown = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None):
            if not issubclass(category, ConvergenceWarning):
                return shown(message, category, filename, lineno, file, line)
            try:
                from tqdm import tqdm

                tqdm.write(f"femcontact: warning: {message}", file=sys.stderr)
            except ImportError:
                print(f"femcontact: warning: {message}", file=sys.stderr, flush=True)

        warnings.simplefilter("always", ConvergenceWarning)
        warnings.showwarning = show
        yield


def build_params(args: argparse.Namespace, build) -> dict:
    """The keyword arguments of ``--param NAME=VALUE`` for the scene's ``build()``, parsed as
    ``femcontact sweep`` parses them (``sweep.parse_params``); one value each, names checked."""
    from .sweep import check_scene_parameters, parse_params

    params = parse_params(args.param or [])
    check_scene_parameters(args.scene, params, build)
    for name, values in params.items():
        if len(values) != 1:
            raise FemcontactError(f"--param {name}: a run takes one value, got {len(values)} ({values}); "
                                  "use femcontact sweep to run several")
    return {name: values[0] for name, values in params.items()}


def interrupted(args: argparse.Namespace, sim, out: Path) -> str:
    """The message of a run stopped by Ctrl-C: the step it stopped in, the frames kept (the series is
    closed by ``Simulator.run`` on the way out) and how to go on: ``--resume`` where this run keeps a
    checkpoint, else a rerun with ``--checkpoint-every``."""
    import numpy as np

    from .io.vtk import read_pvd_entries

    s = sim.state
    done = f"steps up to {s.step} (t = {s.time:.6g} s) are complete" if s.step else "no step was complete"
    lines = [f"femcontact: interrupted in step {s.step + 1}; {done}."]
    pvd = out / "run.pvd"
    try:
        times = sorted({e["time"] for e in read_pvd_entries(pvd)}) if pvd.is_file() else []
    except Exception:  # noqa: BLE001 - the message must still be printed
        times = []
    if times:
        lines.append(f"  {pvd} holds {len(times)} frames, t = {times[0]:g} … {times[-1]:g} s.")
    ck = out / CHECKPOINT
    resume = f"femcontact run {args.scene} --resume {out}"
    if (args.checkpoint_every or args.resume) and ck.is_file():
        try:
            with np.load(ck) as z:
                at = f" holds step {int(z['step'])} (t = {float(z['time']):.6g} s)"
        except Exception:  # noqa: BLE001
            at = ""
        lines.append(f"  The checkpoint {ck}{at}; continue the run with:  {resume}")
    else:
        lines.append("  No checkpoint was kept, so this run cannot be resumed; to be able to continue an "
                     f"interrupted run, rerun it with --checkpoint-every K (e.g. femcontact run "
                     f"{args.scene} --checkpoint-every 100), then continue it with --resume OUT.")
    return "\n".join(lines)


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Adds "(default: X)" only where the help does not already say its default and X means
    something (not None or False), so no option reads "(default: ...) (default: None)"."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text.lower() or action.default is None or action.default is False:
            return text
        return super()._get_help_string(action)


RUN_RECORD = "run.json"       # OUT/run.json: the options of a checkpointed run, read by --resume
CHECKPOINT = "checkpoint.npz"
_RESUMED_OPTIONS = ("every", "checkpoint_every", "dt", "solver", "stiction", "precision", "deterministic", "param")


def _resume_options(args: argparse.Namespace) -> bool:
    """For ``--resume OUT``: set ``args.out`` and fill the options not given from ``OUT/run.json``; refuse
    options that would change the run (dt, solver, precision). False when not resuming."""
    import json

    if getattr(args, "resume", None) is None:
        return False
    out = Path(args.resume)
    if args.out is not None and Path(args.out).resolve() != out.resolve():
        raise FemcontactError(f"--resume {out} continues the run in that folder; drop --out {args.out} "
                              "(or make it the same folder)")
    args.out = str(out)
    record, ck = out / RUN_RECORD, out / CHECKPOINT
    if not ck.is_file() or not record.is_file():
        raise FemcontactError(f"--resume {out}: no {CHECKPOINT} and {RUN_RECORD} there; start the run with "
                              f"--checkpoint-every K --out {out} first")
    try:
        stored = json.loads(record.read_text())
    except (OSError, ValueError) as exc:
        raise FemcontactError(f"--resume {out}: {record} is unreadable ({exc}); start a fresh run") from None
    for key in _RESUMED_OPTIONS:
        given = getattr(args, key)
        if key in ("dt", "solver", "stiction", "precision", "param") and given is not None and given != stored.get(key):
            raise FemcontactError(f"--resume {out}: the run used --{key} {stored.get(key)}, not {given}; "
                                  "a resumed run keeps its settings (drop the option)")
        if given in (None, False):
            setattr(args, key, stored.get(key))
    if args.steps is None and args.duration is None:
        args.steps = stored.get("steps")
    return True


def _resume_or_record(args: argparse.Namespace, sim, out: Path, cfg: dict) -> int:
    """Resuming: load ``OUT/checkpoint.npz`` into ``sim``. Otherwise write ``OUT/run.json`` (the options a
    resume reuses). Return the number of steps still to run so the run ends at its total length."""
    import json

    from .io.vtk import atomic_write_bytes

    dt = sim.scene.dt
    total = args.steps if args.steps is not None else int(round(
        (sim.scene.duration if args.duration is None else args.duration) / dt))
    for tmp in out.glob(f".{CHECKPOINT}.tmp*"):     # a checkpoint save the kill interrupted
        tmp.unlink(missing_ok=True)
    digest = _scene_digest(args)
    if args.resume is not None:
        sim.load_checkpoint(out / CHECKPOINT)
        _check_resumable(out, json.loads((out / RUN_RECORD).read_text()), sim.state.meta, digest)
        print(f"femcontact: resuming {out} at step {sim.state.step} (t = {sim.state.time:.6g} s) of {total}",
              flush=True)
        return max(total - sim.state.step, 0)
    (out / CHECKPOINT).unlink(missing_ok=True)     # a stale checkpoint of an earlier run must not be resumed
    sim.state.meta["scene_sha256"] = digest          # in every checkpoint of this run
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out / RUN_RECORD, json.dumps(_run_options(args, total, digest, cfg), indent=1).encode())
    return total


def _scene_digest(args: argparse.Namespace) -> str:
    """The hash of the scene script and its --param values (``scene_script.scene_hash``)."""
    return scene_hash(args.scene, {"param": sorted(args.param or [])})


def _run_options(args: argparse.Namespace, total: int, digest: str, cfg: dict) -> dict:
    """The options of a run as ``OUT/run.json`` records them (``--resume`` reads them back)."""
    return {"scene": str(args.scene), "scene_sha256": digest, "steps": total, "every": args.every,
            "checkpoint_every": args.checkpoint_every, "dt": args.dt, "solver": args.solver,
            "stiction": args.stiction, "precision": args.precision, "deterministic": bool(cfg.get("deterministic")),
            "param": args.param}


def _record_convergence(args: argparse.Namespace, sim, out: Path, cfg: dict, recorded: bool) -> None:
    """After a run that started (also one stopped by an error): ``OUT/run.json`` gets the solver run
    ("solver_run", why in "solver_choice") and the run's ``convergence`` (``convergence.ConvergenceSummary``:
    unconverged steps, worst e_m and its step), beside the options a checkpointed run recorded at its
    start (``recorded``) or this run's options."""
    import json

    from .io.vtk import atomic_write_bytes

    if sim.convergence is None or not out.is_dir():
        return
    path = out / RUN_RECORD
    if recorded and path.is_file():
        record = json.loads(path.read_text())
    else:
        record = _run_options(args, sim.state.step, _scene_digest(args), cfg)
    record.update(solver_run=sim.contact_solver.name, solver_choice=sim.solver_choice,
                  convergence=sim.convergence.summary.as_dict())
    try:
        atomic_write_bytes(path, json.dumps(record, indent=1).encode())
    except OSError as exc:          # never over the run's own outcome: the series and steps.csv are written
        print(f"femcontact: warning: could not write {path}: {exc}", file=sys.stderr, flush=True)


def _check_resumable(out: Path, record: dict, meta: dict, digest: str) -> None:
    """Refuse ``--resume OUT`` unless OUT/run.json, OUT/checkpoint.npz and the scene script belong
    together (the same scene hash in all three); the series is checked against the checkpoint by
    ``Simulator.run`` (``io.vtk.check_series_mark``)."""
    stored, saved = record.get("scene_sha256"), meta.get("scene_sha256")
    if stored is None or saved is None:
        raise FemcontactError(f"--resume {out}: {RUN_RECORD} or {CHECKPOINT} there records no scene hash (written "
                              "by an older femcontact); it cannot be checked, so start a fresh run")
    if stored != saved:
        raise FemcontactError(f"--resume {out}: {CHECKPOINT} and {RUN_RECORD} there belong to different runs (a "
                              "later run into the folder replaced one of them); start a fresh run (another --out, "
                              "or --overwrite)")
    if digest != stored:
        raise FemcontactError(f"--resume {out}: the scene script {record.get('scene')} changed since the run was "
                              "started (its text differs); resume with the script as it was, or start a fresh run")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="femcontact",
        description="Simulate deformable bodies, cables and rigid bodies in frictional contact "
                    "(COND and SAP-family solvers on Taichi kernels); results are VTK series for ParaView.")
    parser.add_argument("--version", action="version", version=f"femcontact {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="{run,sweep,mesh,render,view,plot,bench}")

    run = sub.add_parser(
        "run", help="run a scene script and write a VTK time series",
        description="Run SCENE.py (a script defining build() -> femcontact.Scene) and write OUT/run.pvd, a "
                    "time series of .vtu/.vtp files that ParaView and PyVista open directly.",
        formatter_class=DefaultsHelpFormatter)
    run.add_argument("scene", metavar="SCENE.py", help="scene script defining build()")
    run.add_argument("--param", action="append", default=None, metavar="NAME=VALUE",
                     help="keyword argument of the scene's build(), e.g. --param segments=80 (repeatable; values "
                          "parsed as femcontact sweep parses them)")
    run.add_argument("--out", default=None, help="output folder (default: out/<scene name>); a folder that holds "
                                                 "an earlier run is refused unless --overwrite")
    run.add_argument("--overwrite", action="store_true",
                     help="replace the earlier run's series in --out (run.pvd, the frames it lists, steps.csv and the "
                          "joint CSVs; other files stay)")
    length = run.add_mutually_exclusive_group()
    length.add_argument("--duration", type=float, default=None, metavar="T",
                        help="simulated time in s (default: the scene's own duration)")
    length.add_argument("--steps", type=int, default=None, metavar="N", help="number of steps instead of a duration")
    run.add_argument("--dt", type=float, default=None, help="override the scene's step size, s")
    run.add_argument("--solver", default=None,
                     help="override the contact solver (auto, cond, sap, lagged, similar, pgs or incp; a scene that "
                          "names none runs auto: lagged where a dynamic rigid body or robot can touch something, "
                          "else cond; the choice is printed at the start)")
    run.add_argument("--unconverged-stop", type=int, default=None, metavar="K",
                     help="stop the run when K consecutive steps end unconverged (solver at its iteration cap or "
                          "above its tolerance; the first such step is warned about once, and the summary, "
                          "OUT/run.json and OUT/steps.csv count them); 0: never stop (default: 50)")
    run.add_argument("--stiction", default=None, choices=["anchored", "regularized"],
                     help="override the scene's stiction: anchored (a sticking contact takes back its slip) or "
                          "regularized (the solvers' own laws, which let a held contact creep slowly); "
                          "default: the scene's own")
    run.add_argument("--arch", default=None, choices=["auto", "cpu", "cuda", "vulkan", "metal"],
                     help="Taichi backend (default: $FEMCONTACT_ARCH or auto = CUDA, then Vulkan/Metal, then CPU)")
    run.add_argument("--precision", default=None, choices=["f64", "f32"],
                     help="floating-point precision (default: $FEMCONTACT_PRECISION or f64)")
    run.add_argument("--deterministic", action="store_true",
                     help="one CPU thread, so the run (and a run resumed from a checkpoint) repeats bit for bit "
                          "(default: $FEMCONTACT_DETERMINISTIC)")
    run.add_argument("--every", type=int, default=None, metavar="K",
                     help="write a frame every K steps; 1 writes every step (default: the scene's frame_dt, else 50 "
                          "frames per simulated second)")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument("--checkpoint-every", type=int, default=None, metavar="K",
                     help="save OUT/checkpoint.npz (atomically) every K steps and at the end, so --resume can "
                          "continue the run")
    run.add_argument("--resume", default=None, metavar="OUT",
                     help="continue the checkpointed run in folder OUT from its last checkpoint, appending to "
                          "OUT/run.pvd; --steps/--duration are the run's total length")
    run.set_defaults(func=cmd_run)

    from .sweep import add_sweep_command

    add_sweep_command(sub)
    from .meshes.cli import add_mesh_commands

    add_mesh_commands(sub)
    from .io.render import add_render_command

    add_render_command(sub)
    from .io.results import add_plot_command

    add_plot_command(sub)
    add_view_parser(sub, run)
    from .bench import add_bench_command

    add_bench_command(sub)
    for name in RUNTIME_COMMANDS:
        sub.choices[name].add_argument(
            "--runtime", default=None, metavar="{quadrants,taichi}",
            help="kernel runtime: quadrants (the default) or taichi; results agree to round-off "
                 "(default: $FEMCONTACT_RUNTIME or quadrants)")
    for p in (parser, *sub.choices.values()):
        p._negative_number_matcher = NEGATIVE_NUMBER    # --dt -1e-3 is a value (then refused), not an option
    return parser


def add_view_parser(sub: "argparse._SubParsersAction", run: argparse.ArgumentParser) -> None:
    """``femcontact view OUT`` and ``run --view``: the run's output opens in the viewer once the run ends
    (``femcontact view OUT`` in a second terminal shows a run while it writes)."""
    from .io.viewer import add_view_command

    add_view_command(sub)
    run.add_argument("--view", action="store_true",
                     help="when the run ends, serve its output in the interactive viewer (femcontact view OUT; "
                          "needs the 'view' extra)")


# argparse takes "-1e-3" for an option (its pattern knows only -1 and -.5); none of our options look like numbers
NEGATIVE_NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$|^-inf$")


def _version() -> str:
    from . import __version__

    return __version__


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        if args.command in RUNTIME_COMMANDS:
            from . import backend

            # before the command imports a kernel: kernels are declared on the runtime chosen here
            backend.select_runtime(args.runtime)
        return int(args.func(args) or 0)
    except FemcontactError as exc:
        print(f"femcontact: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("femcontact: interrupted; frames written so far are complete", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
