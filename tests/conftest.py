"""Shared test setup: one Taichi backend for the whole session: CPU and float64 unless
FEMCONTACT_ARCH / FEMCONTACT_PRECISION say otherwise (e.g. ``FEMCONTACT_ARCH=cuda``, ``FEMCONTACT_PRECISION=f32``)."""
import os

os.environ.setdefault("FEMCONTACT_ARCH", "cpu")

import pytest  # noqa: E402

import femcontact as fc  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _backend():
    fc.backend.init()          # the environment (cpu / f64 by default)
    yield
