"""entry: one thin module per Lambda function (functions/*.py re-export them), sharing runtime.py
(logging, tracing, batch failures); each gets its dependencies from replmon.wiring.
May import: core, probe, signals, fleet, mounts, wiring.

``FUNCTIONS`` maps each function's name in the state machine (``${NameFunctionArn}``
placeholders) and its template (``<Name>Function``; MOUNT_FUNCTIONS are in
templates/mount-baselines.yaml, the rest in template.yaml) to its entry module: the local runner
loads handlers through it, so it works from an installed wheel as well as from a checkout.
"""
FUNCTIONS = {
    "PlanProbes": "replmon.entry.plan_probes",
    "BeginRouteRun": "replmon.entry.begin_route_run",
    "EndRouteRun": "replmon.entry.end_route_run",
    "Housekeeping": "replmon.entry.housekeeping",
    "UploadProbe": "replmon.entry.upload_probe",
    "PollReplication": "replmon.entry.poll_replication",
    "RecordResult": "replmon.entry.record_result",
    "Cleanup": "replmon.entry.cleanup",
    "Report": "replmon.entry.report",
    "IngestEvents": "replmon.entry.ingest_events",
    "CollectSignals": "replmon.entry.collect_signals",
    "Heartbeat": "replmon.entry.heartbeat",
    "Inventory": "replmon.entry.inventory",
    "IngestFioResults": "replmon.entry.ingest_fio",
    "FioTaskStopped": "replmon.entry.fio_task_stopped",
}
#: The functions of the mount baselines' own stack (templates/mount-baselines.yaml), not template.yaml's.
MOUNT_FUNCTIONS = ("IngestFioResults", "FioTaskStopped")
