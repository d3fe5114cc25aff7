"""Typed tools the agent acts through, and the host layer they share."""
