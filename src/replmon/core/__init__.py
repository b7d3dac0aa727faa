"""core: the shared vocabulary - sizes, clock, names, defaults, keys, the route model, the probe
record and its status, statistics, telemetry names, errors, and the ports (ports.py).
May import: nothing else in replmon (no AWS SDK either); every other folder may import it."""
