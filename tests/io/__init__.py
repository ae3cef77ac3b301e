"""Output, results, checkpoints and resume, rendering, the viewer (io/)."""
