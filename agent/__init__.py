"""The agent: planner loop, model clients, safety layer, transcripts, replay and CLI."""

__version__ = "0.1.0"
