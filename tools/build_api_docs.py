"""Build the HTML API reference of femcontact's public modules from their docstrings, with pdoc.

    python tools/build_api_docs.py [OUT]        (default: build/api; open OUT/index.html)

Needs the ``docs`` extra (``pip install -e ".[docs]"``). Importing the modules needs no GPU: it
declares the kernels on the runtime but initialises no backend and compiles nothing (checked here). Every warning pdoc raises (a module
that fails to import, a docstring include that cannot be read, an unparsable annotation, ...) is
printed and makes the build fail (exit 1), so a reference that CI builds cannot rot silently
(tests/app/test_api_docs.py). The folder is replaced as a whole: built beside it, then swapped in.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = Path(__file__).resolve().parent / "api_templates"     # index.html: a list of the modules

# The modules a user imports (README, docs/tutorial.md). A package brings the submodules its __all__
# names: femcontact brings backend, meshes, spec and sweep (naming them again is a pdoc warning).
MODULES = (
    "femcontact",
    "femcontact.scene",
    "femcontact.simulator",
    "femcontact.convergence",
    "femcontact.geometry.shapes",
    "femcontact.kits.gripper",
    "femcontact.control",
    "femcontact.robots",
    "femcontact.io",
    "femcontact.scene_script",
    "femcontact.errors",
)


def build(out: Path, modules: tuple[str, ...] = MODULES) -> list[str]:
    """Write the reference of ``modules`` to ``out`` (replacing it); return pdoc's warnings (empty when clean)."""
    # femcontact.backend's defaults name environment variables (FEMCONTACT_RUNTIME, ...): nothing secret,
    # so pdoc shows them instead of warning that it hides them.
    os.environ.setdefault("PDOC_DISPLAY_ENV_VARS", "1")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import pdoc
    import pdoc.render

    pdoc.render.configure(docformat="restructuredtext", footer_text="femcontact API reference",
                          search=True, show_source=True, template_directory=TEMPLATES)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            pdoc.pdoc(*modules, output_directory=tmp)
        pdoc_dir = str(Path(pdoc.__file__).parent)
        problems = [f"{w.category.__name__}: {w.message}" for w in caught if str(w.filename).startswith(pdoc_dir)]
        from femcontact import backend

        if backend._config is not None:      # importing must declare kernels only: no device, nothing compiled
            problems.append(f"importing femcontact's modules initialised the {backend._config['arch']} backend; "
                            "a module calls backend.init/ensure_init at import time")
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", default=str(ROOT / "build" / "api"), help="output folder (default build/api)")
    args = parser.parse_args(argv)
    try:
        import pdoc  # noqa: F401
    except ImportError:
        print("build_api_docs: pdoc is not installed; pip install -e \".[docs]\"", file=sys.stderr)
        return 2
    problems = build(Path(args.out))
    for p in problems:
        print(f"build_api_docs: {p}", file=sys.stderr)
    index = Path(args.out) / "index.html"
    if problems:
        print(f"build_api_docs: {len(problems)} warning(s); the reference in {args.out} is incomplete", file=sys.stderr)
        return 1
    print(f"build_api_docs: {index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
