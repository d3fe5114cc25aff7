"""A termination signal that lands inside pydantic is sent again 20 ms later, as during an import.

Raised there, the interrupt can come out of a lazily built schema as a SchemaError or a validation
error instead of a KeyboardInterrupt, and the run would end as a crash instead of as stopped.
"""

from __future__ import annotations

import signal
import sys
import threading

from pydantic import BaseModel, field_validator

from agent.errors import Signalled
from app import signals


def test_a_signal_in_a_pydantic_frame_is_resent_and_one_elsewhere_raises_at_once():
    frames = []

    class Model(BaseModel):
        x: int

        @field_validator("x")
        @classmethod
        def grab(cls, v):
            frames.append(sys._getframe())
            return v

    Model(x=1)
    assert signals._in_half_made(frames[0]) and not signals._in_half_made(sys._getframe())

    got = threading.Event()
    previous = signal.signal(signal.SIGUSR1, lambda s, f: got.set())
    try:
        signals._on_termination(signal.SIGUSR1, frames[0])  # inside pydantic: no raise, the signal comes back
        assert got.wait(5) and not signals._SIGNALLED
        try:
            signals._on_termination(signal.SIGTERM, sys._getframe())
            raise AssertionError("a signal outside pydantic and imports must raise at once")
        except Signalled as e:
            assert e.signum == signal.SIGTERM
    finally:
        signal.signal(signal.SIGUSR1, previous)
        signals._SIGNALLED.clear()
