"""No kernel takes more than ``MAX_PARAMETERS`` parameters (issues 28 and 30: data travels in named
bundles, ``solvers/cond/layout.py``'s tables and ``HostScalars``, not long positional lists), checked by
reading the source with ``ast`` (nothing is imported): every function under ``femcontact/`` decorated
``@ti.kernel`` (or ``@ti.kernel(...)``) counts its parameters, compile-time templates included.
"""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "femcontact"
MAX_PARAMETERS = 20

# Known debts, listed with their counts so that none can grow and so that shrinking one below the limit
# makes this test fail until its entry is removed (none left: issue 30).
PENDING: dict = {}


def _is_kernel(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(target, ast.Attribute) and target.attr == "kernel"


def kernel_parameters() -> dict:
    """``"module path:kernel" -> parameter count`` of every kernel in the package."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef) and any(_is_kernel(d) for d in node.decorator_list):
                a = node.args
                n = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + bool(a.vararg) + bool(a.kwarg)
                out[f"{path.relative_to(PACKAGE).as_posix()}:{node.name}"] = n
    return out


def test_the_checker_finds_the_kernels():
    found = kernel_parameters()
    assert len(found) > 50
    assert found["solvers/cond/anderson.py:anderson_step"] == 5


def test_no_kernel_takes_more_than_twenty_parameters():
    found = kernel_parameters()
    over = {k: n for k, n in found.items() if n > MAX_PARAMETERS and PENDING.get(k) != n}
    assert not over, f"kernels over {MAX_PARAMETERS} parameters (pass bundles: solvers/cond/layout.py): {over}"
    fixed = sorted(k for k in PENDING if found.get(k, 0) <= MAX_PARAMETERS)
    assert not fixed, f"now within the limit (or gone): remove from PENDING: {fixed}"
