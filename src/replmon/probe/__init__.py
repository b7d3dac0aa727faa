"""probe: active probes - the request (validated once, at the edge), the plan, the upload, the
adaptive poll, the latency record, housekeeping and the report; steps.py is each Lambda's step.
May import: core, signals (replica arrivals and in-flight markers refine the records it stores)."""
