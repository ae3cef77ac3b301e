"""`femcontact mesh info|convert` commands; the main CLI calls add_mesh_commands()."""
from __future__ import annotations

import argparse
import sys
import warnings

from ..errors import FemcontactError

_FORMATS = ".msh (gmsh 2/4), .vtu, .vtk, .mesh (medit), .inp (Abaqus), .xdmf; surfaces .stl, .obj, .ply, .off"


def add_mesh_commands(subparsers) -> argparse.ArgumentParser:
    """Register `mesh info FILE` and `mesh convert IN OUT` on an argparse subparsers object.

    Each leaf parser sets ``func``: call ``args.func(args)`` to run it; it returns an exit code.
    """
    mesh = subparsers.add_parser(
        "mesh", help="inspect and convert mesh files",
        description=f"Inspect and convert meshes. Reads {_FORMATS}.",
    )
    sub = mesh.add_subparsers(dest="mesh_command", metavar="{info,convert}")
    mesh.set_defaults(func=lambda args: (mesh.print_help(), 2)[1])

    info = sub.add_parser(
        "info", help="counts, bounding box, volume and element quality of a mesh",
        description="Load a mesh the way a scene would (validated, surfaces tetrahedralized) and print "
                    "vertex/tet counts, bounding box, volume, edge lengths, aspect ratios and dihedral angles.",
    )
    info.add_argument("file", help=f"mesh file ({_FORMATS})")
    info.add_argument("--scale", type=float, default=1.0,
                      help="multiply coordinates by S, e.g. 1e-3 for a file in millimetres (default 1)")
    info.add_argument("--min-quality", type=float, default=None,
                      help="refuse tets whose volume quality 6*sqrt(2)*V/l_max^3 is below Q (default 1e-3)")
    info.set_defaults(func=cmd_mesh_info)

    conv = sub.add_parser(
        "convert", help="convert between mesh formats, optionally tetrahedralizing a surface",
        description="Read IN, validate/repair it (orientation, duplicate and unused vertices), and write OUT "
                    "in the format given by its suffix. Surface inputs (.stl/.obj/.ply/.off) are "
                    "tetrahedralized with TetGen (pip install tetgen). A surface OUT suffix writes the "
                    "boundary triangles.",
    )
    conv.add_argument("input", metavar="IN", help=f"input mesh ({_FORMATS})")
    conv.add_argument("output", metavar="OUT", help="output file; the format follows the suffix (.vtu, .msh, ...)")
    conv.add_argument("--tetrahedralize", action="store_true",
                      help="(re)mesh the volume from the boundary surface even if IN already has tets")
    conv.add_argument("--max-volume", type=float, default=None, metavar="V",
                      help="largest tet volume in m^3 (after --scale) when tetrahedralizing")
    conv.add_argument("--edge-length", type=float, default=None, metavar="L",
                      help="target tet edge length in m (after --scale) when tetrahedralizing")
    conv.add_argument("--scale", type=float, default=1.0, metavar="S",
                      help="multiply coordinates by S, e.g. 1e-3 for millimetres to metres (default 1)")
    conv.set_defaults(func=cmd_mesh_convert)
    return mesh


def _fail(err) -> int:
    print(f"error: {err}", file=sys.stderr)
    return 1


def mesh_info(path, scale: float = 1.0, min_quality: float | None = None, out=None) -> int:
    """Print the quality report of a mesh file; return an exit code (0 ok, 1 error)."""
    from . import load, quality_report
    from .surface import boundary_faces, surface_area

    out = out or sys.stdout
    kw = {} if min_quality is None else {"min_quality": min_quality}
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            m = load(path, scale=scale, **kw)
        report = quality_report(m)
    except FemcontactError as e:
        return _fail(e)
    print(f"mesh: {path}", file=out)
    print(report, file=out)
    print(f"boundary:        {len(boundary_faces(m))} triangles, area {surface_area(m):.6g}", file=out)
    if m.cell_sets:
        print("cell sets:       " + ", ".join(f"{k} ({len(v)})" for k, v in m.cell_sets.items()), file=out)
    for w in caught:
        print(f"note: {w.message}", file=out)
    return 0


def mesh_convert(input, output, tetrahedralize: bool = False, max_volume=None, edge_length=None,
                 scale: float = 1.0, out=None) -> int:
    """Load IN (validated), write OUT; return an exit code (0 ok, 1 error)."""
    from . import load, save

    out = out or sys.stdout
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            m = load(input, scale=scale, tetrahedralize=True if tetrahedralize else None,
                     max_volume=max_volume, edge_length=edge_length)
        save(m, output)
    except FemcontactError as e:
        return _fail(e)
    for w in caught:
        print(f"note: {w.message}", file=out)
    print(f"wrote {output}: {m.n_vertices} vertices, {m.n_tets} tets, volume {m.volume():.6g}", file=out)
    return 0


def cmd_mesh_info(args) -> int:
    return mesh_info(args.file, scale=args.scale, min_quality=args.min_quality)


def cmd_mesh_convert(args) -> int:
    return mesh_convert(args.input, args.output, tetrahedralize=args.tetrahedralize,
                        max_volume=args.max_volume, edge_length=args.edge_length, scale=args.scale)


def main(argv=None) -> int:
    """Stand-alone entry point: python -m femcontact.meshes.cli mesh info FILE."""
    parser = argparse.ArgumentParser(prog="femcontact")
    add_mesh_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):
        parser.print_help()
        return 2
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
