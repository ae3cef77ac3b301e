"""docs/tutorial.md runs top to bottom, as a reader would run it, so it cannot drift from the code.

Every ```python block runs, in order, in one namespace, with a fresh folder as the working directory
(holding links to the repository's ``scenes/`` and ``meshes/``, as if the reader were in the
repository root). A block whose first line is ``# save as NAME.py`` is also written to that file
first (a scene script the console blocks then run). Every ```console block whose first line is
``$ femcontact ...`` runs its ``$`` commands (``\\`` continues a line, ``#`` starts a comment, lines
without ``$`` are sample output) through this interpreter's ``femcontact`` command. Each must
succeed. ``<!-- include: FILE.md -->`` splices in docs/FILE.md when it exists (the reading and
plotting section, docs/tutorial_reading.md), and nothing otherwise.

The tutorial keeps its runs short (20-70 steps of small scenes) so this file stays within about
two minutes on a 2-core CPU; it is not marked slow: CI runs it.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "docs" / "tutorial.md"
INCLUDE = re.compile(r"^<!-- include: (?P<file>[\w.-]+\.md) -->[ \t]*$", re.M)
FENCE = re.compile(r"^```(?P<lang>[\w-]*)[ \t]*\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)
SAVE_AS = re.compile(r"^# save as (?P<name>[\w.-]+\.py)[ \t]*$")
COMMAND_TIMEOUT = 600          # s per command: a cold kernel cache on a loaded 2-core machine compiles for minutes


@dataclass
class Block:
    kind: str           # "python" or "console"
    code: str
    where: str          # file:line of the block's first line, for messages


def tutorial_text() -> tuple[str, list[tuple[int, str, int]]]:
    """The tutorial with its includes spliced in, and where each included part starts:
    (offset in the text, file name, line in that file) triples, for block locations."""
    text = TUTORIAL.read_text(encoding="utf-8")
    out, parts, pos = "", [(0, TUTORIAL.name, 1)], 0
    for m in INCLUDE.finditer(text):
        out += text[pos:m.start()]
        part = TUTORIAL.parent / m.group("file")
        if part.is_file():
            parts.append((len(out), part.name, 1))
            out += part.read_text(encoding="utf-8")
        parts.append((len(out), TUTORIAL.name, text.count("\n", 0, m.end()) + 1))
        pos = m.end()
    return out + text[pos:], parts


def blocks(text: str, parts: list[tuple[int, str, int]]) -> list[Block]:
    """The runnable blocks of the tutorial text, in order (module docstring)."""
    found = []
    for m in FENCE.finditer(text):
        lang, body = m.group("lang"), m.group("body")
        start, name, line0 = max((p for p in parts if p[0] <= m.start()), key=lambda p: p[0])
        where = f"{name}:{line0 + text.count(chr(10), start, m.start())}"
        if lang == "python":
            found.append(Block("python", body, where))
        elif lang == "console" and body.lstrip().startswith("$ femcontact"):
            found.append(Block("console", body, where))
    return found


def console_commands(body: str) -> list[list[str]]:
    """The ``$`` commands of a console block as argument lists (``\\`` joins lines, ``#`` comments)."""
    commands, current = [], None
    for line in body.splitlines():
        if current is not None:
            current += " " + line.strip()
        elif line.startswith("$ "):
            current = line[2:].strip()
        else:
            continue                     # sample output
        if current.endswith("\\"):
            current = current[:-1]
            continue
        commands.append(shlex.split(current, comments=True))
        current = None
    assert current is None, f"a console command ends in a line continuation: {body!r}"
    return commands


def femcontact_command() -> list[str]:
    """This interpreter's ``femcontact`` console script (the venv's), else ``python -m femcontact``."""
    script = Path(sys.executable).with_name("femcontact.exe" if os.name == "nt" else "femcontact")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "femcontact"]


def test_tutorial_has_runnable_blocks_and_one_reading_marker():
    """The tutorial is what the runner below executes: no empty run, the include marker once."""
    raw = TUTORIAL.read_text(encoding="utf-8")
    assert len(INCLUDE.findall(raw)) == 1, "docs/tutorial.md must hold the line '<!-- include: tutorial_reading.md -->' once"
    assert INCLUDE.search(raw).group("file") == "tutorial_reading.md"
    found = blocks(*tutorial_text())
    kinds = [b.kind for b in found]
    assert kinds.count("python") >= 5 and kinds.count("console") >= 3, kinds
    commands = [" ".join(c) for b in found if b.kind == "console" for c in console_commands(b.code)]
    for needed in ("femcontact run", "femcontact sweep", "--checkpoint-every", "--resume"):
        assert any(needed in c for c in commands), f"the tutorial runs no '{needed}' command: {commands}"
    assert all(c.startswith("femcontact ") for c in commands), commands


def test_console_command_parsing():
    body = "$ femcontact run a.py \\\n      --steps 20   # short\nsample output\n$ femcontact sweep b.py --param x=1,2\n"
    assert console_commands(body) == [["femcontact", "run", "a.py", "--steps", "20"],
                                      ["femcontact", "sweep", "b.py", "--param", "x=1,2"]]


def test_tutorial_runs_top_to_bottom(tmp_path, monkeypatch):
    """Every block of docs/tutorial.md (with its reading section) succeeds, in order."""
    for name in ("scenes", "meshes"):
        (tmp_path / name).symlink_to(ROOT / name, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")                 # plots are saved, never shown
    monkeypatch.setenv("FEMCONTACT_ARCH", os.environ.get("FEMCONTACT_ARCH", "cpu"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    namespace: dict = {"__name__": "tutorial"}
    found = blocks(*tutorial_text())
    assert found
    for block in found:
        start = time.perf_counter()
        run_block(block, namespace, tmp_path, env)
        print(f"{block.where}: {block.kind} block, {time.perf_counter() - start:.1f} s")     # pytest -s shows them


def run_block(block: Block, namespace: dict, cwd: Path, env: dict) -> None:
    """Run one block of the tutorial (module docstring); fail with its location and output."""
    if block.kind == "python":
        save = SAVE_AS.match(block.code.splitlines()[0])
        if save:
            (cwd / save.group("name")).write_text(block.code, encoding="utf-8")
        try:
            exec(compile(block.code, block.where, "exec"), namespace)      # noqa: S102 - the tutorial's own code
        except Exception:
            pytest.fail(f"the python block at {block.where} failed:\n{traceback.format_exc(limit=-2)}")
        return
    for argv in console_commands(block.code):
        assert argv[0] == "femcontact", f"{block.where}: only femcontact commands run here, got {argv}"
        proc = subprocess.run(femcontact_command() + argv[1:], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=COMMAND_TIMEOUT)
        assert proc.returncode == 0, (f"{block.where}: '{shlex.join(argv)}' exited {proc.returncode}\n"
                                      f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")
