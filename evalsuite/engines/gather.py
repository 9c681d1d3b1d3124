"""When a read of a trickle waits before it looks at the socket, so that it brings several events, not one.

A server streaming slower than the client reads sends an event at a time, and
a read that waits for the socket wakes for each: about 30 us of the client's
CPU an event (the loop's wake-up, the HTTP layers, a cold cache), several
times the event's own work.  After a read that brought a trickle, the next
waits a share of the time since its request went out and then takes what came
meanwhile (`sockets.SocketStream`).  What that costs is when an answer is
seen: its end, and with it the request's latency, at most GATHER_SHARE late.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

GATHER_SHARE = 0.01
"""The share of the time since the request went out that a read of a trickle waits (at most GATHER_MAX_S)."""
GATHER_MAX_S = 0.02
GATHER_MIN_S = 0.0002  # shorter waits gather too little to pay for their timer
TRICKLE = 16384
"""A read that waited and brought fewer bytes read a trickle: a server sending as it generates.  A wait also
lasts no longer than this many bytes take to come at the trickle's rate, far less than a socket's buffer holds,
so a sender is never held back."""


@dataclass
class Gathering:
    """One connection's reads so far, and how long the next read that would wait for the socket waits first."""

    sent_at: float = field(default_factory=time.monotonic)
    """When the last request went out."""
    trickle: bool = False
    """The last read that waited brought less than TRICKLE."""
    waited: float = math.inf
    """How long the last read that waited waited for its data (0 where a gathering wait found data waiting)."""
    rate: float = math.inf
    """Bytes a second the last read that waited brought, over the time it waited."""

    def sent(self) -> None:
        """A request went out: the read of its answer looks at once."""
        self.sent_at, self.trickle, self.waited = time.monotonic(), False, math.inf

    def wait(self, now: float, timeout: float | None) -> float:
        """How long a read that would wait for the socket at `now` waits before it looks (0: it watches it).

        Never the read after a request, nor one after a long wait (a prefill's, or a server slower than
        the wait, whose events are read as they come: the first token is seen at once), nor one whose
        deadline (`timeout` from now) is near."""
        if not self.trickle:
            return 0.0
        wait = min(GATHER_MAX_S, (now - self.sent_at) * GATHER_SHARE, TRICKLE / self.rate)
        if wait < GATHER_MIN_S or self.waited >= wait or (timeout is not None and 2 * wait > timeout):
            return 0.0
        return wait

    def read(self, got: int, waited: float, *, gathered: bool) -> None:
        """A read that waited `waited` seconds brought `got` bytes; `gathered`: a gathering wait found them."""
        self.trickle = 0 < got < TRICKLE
        self.rate = got / waited if waited > 0 else math.inf
        self.waited = 0.0 if gathered else waited
