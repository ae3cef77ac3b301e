"""Content-keyed on-disk cache of expensive, deterministic host-side products: robot collision meshes,
their signed-distance grids, parsed URDFs and differential-IK paths (start-up, issue 28).

An entry is a set of numpy arrays in ``cache_folder() / <kind>-<key>.npz``. The key hashes everything
the product depends on: the caller passes its inputs (file bytes, arrays, parameters) and the version
of the code that makes it (``content_key``), so a changed input or a changed algorithm misses and
recomputes. Entries are written atomically (a temporary file renamed over the entry) and read without
pickles; an entry that cannot be read whole (truncated, CRC error, another key, missing arrays) is a
miss, never trusted. The folder sits under the kernel cache's root: ``FEMCONTACT_CACHE_DIR`` (default
``~/.cache/femcontact/kernels``) / ``geometry``, so emptying that folder makes a start cold in full.
A read-only or full disk only costs the recomputation.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
import threading
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

import numpy as np

FORMAT = 1          # the entry layout; part of every key
KEY_NAME = "__key__"


def cache_folder() -> Path:
    """``FEMCONTACT_CACHE_DIR`` (default ``~/.cache/femcontact/kernels``) / ``geometry``."""
    root = os.environ.get("FEMCONTACT_CACHE_DIR") or str(Path.home() / ".cache" / "femcontact" / "kernels")
    return Path(root) / "geometry"


def _update(h, part) -> None:
    """Feed one key part to the hash, tagged by its type (so ``"1"``, ``1`` and ``1.0`` differ)."""
    if isinstance(part, (bytes, bytearray, memoryview)):
        data = bytes(part)
        h.update(b"b%d:" % len(data) + data)
    elif isinstance(part, str):
        data = part.encode()
        h.update(b"s%d:" % len(data) + data)
    elif isinstance(part, (list, tuple)):
        h.update(b"l%d:" % len(part))
        for p in part:
            _update(h, p)
    elif part is None or isinstance(part, (bool, int, float, np.integer, np.floating)):
        h.update(b"r" + repr(part if part is None or isinstance(part, bool) else part.item()
                             if isinstance(part, np.generic) else part).encode() + b";")
    else:
        a = np.ascontiguousarray(part)
        if a.dtype == object:
            raise TypeError(f"content_key: cannot hash {type(part).__name__}")
        h.update(b"a" + a.dtype.str.encode() + repr(a.shape).encode() + b":" + a.tobytes())


def content_key(*parts) -> str:
    """Hex SHA-256 of ``parts`` (bytes, str, numbers, None, arrays, nested lists/tuples of them) and
    ``FORMAT``: equal parts give equal keys, any changed byte, shape, dtype or value another."""
    h = hashlib.sha256()
    _update(h, (FORMAT, *parts))
    return h.hexdigest()


@functools.lru_cache(maxsize=None)
def library_version(dist: str) -> str:
    """The installed version of distribution ``dist`` ("" if absent), once per process: for the keys of
    products a library makes (a new trimesh may make another mesh)."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return ""


def entry_path(kind: str, key: str) -> Path:
    return cache_folder() / f"{kind}-{key}.npz"


def load(kind: str, key: str, names: Sequence[str]) -> Optional[dict[str, np.ndarray]]:
    """The arrays ``names`` of entry (kind, key), read whole; None when absent or not intact."""
    try:
        with np.load(entry_path(kind, key), allow_pickle=False) as data:
            if str(data[KEY_NAME]) != key:
                return None
            return {name: data[name] for name in names}   # reading a member checks its CRC
    except Exception:  # noqa: BLE001 - missing, truncated, corrupt (BadZipFile, zlib, ValueError...): a miss
        return None


def store(kind: str, key: str, arrays: Mapping[str, np.ndarray]) -> None:
    """Write entry (kind, key) atomically; an unwritable cache is skipped (it only costs time)."""
    path = entry_path(kind, key)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.{threading.get_ident()}.tmp.npz")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(tmp, **{KEY_NAME: np.array(key)}, **{k: np.asarray(v) for k, v in arrays.items()})
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass


def cached(kind: str, key: str, names: Sequence[str],
           compute: Callable[[], Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Entry (kind, key) if intact (its arrays ``names``), else ``compute()``'s arrays, stored for the
    next process."""
    arrays = load(kind, key, names)
    if arrays is None:
        arrays = {k: np.asarray(v) for k, v in compute().items()}
        store(kind, key, arrays)
    return arrays
