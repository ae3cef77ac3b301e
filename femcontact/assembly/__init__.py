"""Assembly of the one linear system A v̂ = b of a step."""
