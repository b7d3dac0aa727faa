"""signals: passive signals - S3 event parsing, replica arrivals, events ingest, in-flight
markers, RTC metrics, a route's RPO and SLO (health) and the scheduled collector.
May import: core only (probes import signals, never the other way)."""
