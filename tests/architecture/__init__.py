"""The source's structure, read with ast: import layers, kernel parameters."""
