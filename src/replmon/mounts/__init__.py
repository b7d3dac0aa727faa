"""mounts: mount throughput baselines - fio presets of the studies, the runner (the container's
entry point, runner.py), result parsing, baselines and regressions, knee detection, ingestion.
May import: core only (runner.py, an entry point, also adapters for its clients and EMF)."""
