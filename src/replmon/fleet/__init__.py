"""fleet: the routes to measure - today, discovery from buckets' replication configurations
(discovery.py); the route registry and the inventory of many buckets are to come here.
May import: core only."""
