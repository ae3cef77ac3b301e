"""The mesh pipeline (meshes/)."""
