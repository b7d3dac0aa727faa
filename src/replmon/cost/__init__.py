"""cost: what a probe schedule costs per month, modelled before anyone deploys it (estimate.py,
with its list prices in pricing.json).
May import: core, probe (it plays the real plan and poller against modelled latencies), fleet (the alarms
it prices), signals (the reads it prices: the expectation's 72 hour items)."""
