"""The application layer: command line, sweeps, benchmarks, the tutorial, the API docs."""
