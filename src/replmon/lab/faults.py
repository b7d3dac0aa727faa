"""Network faults between the lab's source and destination MinIO, through Toxiproxy's HTTP API.

The source's replication target is a Toxiproxy listener in front of the destination: a toxic on
that proxy slows, throttles, hangs or resets exactly the replication traffic, while the probes'
own PUTs and HEADs (straight to each MinIO) are untouched. Toxic types and attributes are
Toxiproxy's (README, "Toxics"): latency {latency, jitter} ms, bandwidth {rate} KB/s, timeout
{timeout} ms (0: hold the data, never answer), reset_peer {timeout} ms.
"""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass
from typing import Any

from replmon.lab.servers import LOOPBACK, LabError, free_port

#: name -> (toxic type, attributes): what `replmon lab chaos --fault` accepts.
FAULTS: dict[str, tuple[str, dict[str, int]]] = {
    "latency": ("latency", {"latency": 4000, "jitter": 0}),
    "bandwidth": ("bandwidth", {"rate": 256}),  # KB/s: 1 MiB takes ~4 s
    "hang": ("timeout", {"timeout": 0}),
    "reset": ("reset_peer", {"timeout": 0}),
}


@dataclass
class Toxiproxy:
    api: str  # http://127.0.0.1:PORT

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        req = urllib.request.Request(self.api + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=5) as r:  # loopback only
                text = r.read()
        except OSError as exc:
            raise LabError(f"toxiproxy {method} {path}: {exc}") from exc
        return json.loads(text) if text.strip() else None

    def proxy(self, name: str, upstream_port: int) -> int:
        """A listener on a free loopback port forwarding to ``upstream_port``; returns its port."""
        port = free_port()
        self._call("POST", "/proxies", {"name": name, "listen": f"{LOOPBACK}:{port}", "upstream": f"{LOOPBACK}:{upstream_port}",
                                        "enabled": True})
        return port

    def remove(self, proxy: str) -> None:
        self._call("DELETE", f"/proxies/{proxy}")

    def toxic(self, proxy: str, name: str, kind: str, stream: str, **attributes: int) -> None:
        """A toxic of Toxiproxy's ``kind`` on one direction of ``proxy``, on every connection."""
        self._call("POST", f"/proxies/{proxy}/toxics", {"name": name, "type": kind, "stream": stream, "toxicity": 1.0,
                                                        "attributes": attributes})

    def add(self, proxy: str, fault: str, **attributes: int) -> None:
        kind, defaults = FAULTS[fault]
        # upstream = the source's PUT bodies to the destination (what a bandwidth cap throttles);
        # downstream = the destination's answers (a latency there delays every request's end).
        self.toxic(proxy, fault, kind, "upstream" if fault == "bandwidth" else "downstream", **{**defaults, **attributes})

    def heal(self, proxy: str) -> None:
        for t in self._call("GET", f"/proxies/{proxy}/toxics") or []:
            self._call("DELETE", f"/proxies/{proxy}/toxics/{t['name']}")

    def toxics(self, proxy: str) -> list[str]:
        return [t["name"] for t in self._call("GET", f"/proxies/{proxy}/toxics") or []]
