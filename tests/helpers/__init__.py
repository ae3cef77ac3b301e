"""Shared test helpers: finite differences, scene loading, oscillation periods, the headless browser,
and the small scene scripts the subprocess tests run by path."""
