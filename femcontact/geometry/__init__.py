"""Geometry, host side (numpy): shapes and their signed distances (``shapes``), mass properties."""
