"""Shared test setup: one Taichi backend (CPU, float64) for the whole session."""
import os

os.environ.setdefault("FEMCONTACT_ARCH", "cpu")

import pytest  # noqa: E402

import femcontact as fc  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _backend():
    fc.backend.init("cpu", "f64")
    yield
