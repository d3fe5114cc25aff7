"""Recorded sessions: examples for people and fixtures for the replay tests."""
