"""Import the scene scripts of ``scenes/`` (not a package) by file path, once per test session.

Tests that need a scene build it through the scene's own ``build(**kwargs)``, so a test and the
scene a user runs are the same setup; keyword arguments change size, solver or parameters."""
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCENES = Path(__file__).resolve().parents[1] / "scenes"
_loaded: dict[str, ModuleType] = {}


def scene_names() -> list[str]:
    """Every scene script, by file stem (``scenes/*.py``)."""
    return sorted(p.stem for p in SCENES.glob("*.py") if not p.name.startswith("_"))


def load_scene(name: str) -> ModuleType:
    """The module of ``scenes/<name>.py`` (imported once, under the name ``scenes_<name>``)."""
    if name not in _loaded:
        path = SCENES / f"{name}.py"
        spec = importlib.util.spec_from_file_location(f"scenes_{name}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        _loaded[name] = module
    return _loaded[name]
