"""The simulator's run: control between steps, runs that always stop."""
