"""Fleets: inventories of hosts, recipes learned on a canary, and rolling them out batch by batch."""
