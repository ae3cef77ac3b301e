"""The scenes of scenes/ and the papers' experiments, run with their known answers."""
