"""Preemption: SIGTERM (SLURM's notice before SIGKILL) and SIGINT (Ctrl-C) end a run cleanly.

:func:`preemptible` installs handlers that only note the signal; a step loop asks
:func:`requested` between launches, finishes what it has in flight, writes what it must
(the store flushed, a snapshot, the store marked ``preempted at step N``) and raises
:class:`Preempted`, whose ``exit_code`` (143 for SIGTERM, 130 for SIGINT, as a shell reports
a process those signals ended) the command line exits with. A second signal while the run
winds down ends it at once, as the signal would have. Outside the main thread, or with
handlers installed by someone else that are not the defaults, nothing is installed.
"""

from __future__ import annotations

import contextlib
import signal
import threading

__all__ = ["Preempted", "preemptible", "requested", "request", "SIGNALS"]

SIGNALS = (signal.SIGTERM, signal.SIGINT)
_pending: list[int] = []


class Preempted(BaseException):
    """A run stopped on a signal after writing what it must (a :class:`BaseException`, as
    KeyboardInterrupt: ``except Exception`` does not swallow it)."""

    def __init__(self, signum: int, step: int):
        self.signum, self.step = int(signum), int(step)
        self.store: str | None = None  # the store to resume, where the run had one
        name = signal.Signals(self.signum).name
        super().__init__(f"{name} at step {self.step:,}")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def requested() -> int | None:
    """The signal that asked the run to stop (None: none)."""
    return _pending[0] if _pending else None


def request(signum: int = signal.SIGTERM) -> None:
    """Asks the running loop to stop as on ``signum`` (tests; a rank told by another)."""
    if not _pending:
        _pending.append(int(signum))


def _handler(signum, frame) -> None:
    if _pending:  # the second signal: the user means it
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)
    _pending.append(int(signum))


@contextlib.contextmanager
def preemptible(enabled: bool = True):
    """SIGTERM and SIGINT noted (not acted on) inside the block; the handlers before it
    restored after. A request left over from an earlier run is cleared on entry."""
    _pending.clear()
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    ours = [s for s, h in previous.items() if h in (signal.SIG_DFL, signal.default_int_handler)]
    for s in ours:
        signal.signal(s, _handler)
    try:
        yield
    finally:
        for s in ours:
            signal.signal(s, previous[s])
        _pending.clear()
