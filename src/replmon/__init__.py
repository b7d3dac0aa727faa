"""replmon: measure S3 replication latency (the RPO you really get) with active probes.

Domain modules (no boto3): sizes, presets, config, plan, interval, polling, stats, record,
results, upload, poller. Ports: ports. Adapters: adapters.s3, adapters.dynamodb,
adapters.metrics. Entry points: service (wired steps), lambda_entry, cli, lab.
"""

__version__ = "0.1.0"
