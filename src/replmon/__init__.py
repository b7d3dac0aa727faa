"""replmon: measure S3 replication latency (the RPO you really get) with active probes, passive
signals and mount throughput baselines.

Folders by job (docs/ARCHITECTURE.md draws how data moves between them): ``core`` (shared
vocabulary and ports), ``probe``, ``signals``, ``fleet``, ``mounts``, ``cost`` (the domain, no
AWS calls); ``adapters`` (AWS behind the ports) and ``wiring`` (the composition root); ``entry``
(Lambda handlers), ``local``, ``lab`` and ``cli`` (off Lambda). tests/test_layering.py keeps
the imports pointing one way.
"""

__version__ = "0.1.0"
