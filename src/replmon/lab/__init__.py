"""lab: the local lab - two MinIO servers with real replication, DynamoDB Local, Toxiproxy, the
event path and the mount targets; runs, benchmarks and chaos on them. No AWS account, loopback only.
May import: everything below the CLI (core, probe, signals, fleet, mounts, cost, adapters, wiring, entry, local)."""
