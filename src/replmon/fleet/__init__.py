"""fleet: the fleet of routes - discovery from buckets' replication configurations (discovery.py),
and (docs/design/fleet.md) the inventory, the fleet plan and leases, fleet alarms, the dashboard and the
fleet report. The registry's item model and the cadence grammar are shared vocabulary: core/.
May import: core, probe (a route-run expands into probes), signals (the fleet report reads health),
cost (the planner's caps price each route with `replmon cost`'s model: one model, fleet/caps.py)."""
