"""Stand-ins for the GPU that the CPU tests of labkit.timing and its callers share."""

from labkit import timing


class NeverHeld(timing.FakeStream):
    """A stream whose start event has always fired before the host finishes issuing (a host descheduled mid-batch,
    or slower than any spin): every spin ends early. `spins` lists each spin asked for, in order."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.spins = []

    def block(self, seconds):
        self.spins.append(seconds)
        super().block(seconds)

    def query(self, event_t):
        return True
