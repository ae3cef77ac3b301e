"""The kernel runtime and its cache (backend.py), and layout.HostScalars."""
