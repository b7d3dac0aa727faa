"""local: replmon off Lambda - the real state machine under moto's interpreter (aslrun.py), a
typed request run through it (execution.py), the template reader, tables, charts. Not in the layer.
May import: core, probe, signals, fleet, adapters, wiring, entry (the very handlers that deploy)."""
