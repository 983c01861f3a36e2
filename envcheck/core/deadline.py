"""One deadline for a whole command: its targets' work and envcheck's own (hashing, scanning, pip runs,
diffing) end by it.

A command makes one ``Deadline`` from ``--timeout`` (or its default) as it starts and passes it down; each
piece of work takes what is left: a child process ``remaining()`` seconds (or ``within(cap)``, the earlier
of the command's deadline and its own cap), a loop ``check(step)`` between items, which raises
``DeadlineExpired`` once it has passed. ``DeadlineExpired`` is an ``EnvcheckError``: the command ends with one
line naming the step it was in and what it had finished, and exit 2, unless the command documents a
partial verdict for that step (a file not hashed by then keeps RECORD's digest, ``unhashed``).

The targets are killed at ``at``; envcheck's own reading of what they left gets ``OWN_WORK_GRACE_S`` more
(``for_own_work``), so that a target using all of ``--timeout`` still leaves a manifest that says so. The
whole command is over by ``--timeout`` + that grace + the time to write its report (docs/guarantees.md).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from envcheck.core.errors import EnvcheckError

# What envcheck's own work may take past the targets' deadline: reading the result a target left at the
# deadline, and hashing what it names. Well within the 5 s the hostile-input budget allows past a deadline.
OWN_WORK_GRACE_S = 2.0


class DeadlineExpired(EnvcheckError):
    """The command's deadline passed during ``step``: the message names it, what was done, and how to give
    the command more time."""

    def __init__(self, step: str, deadline: Deadline, done: str | None = None) -> None:
        self.step = step
        finished = f" ({done})" if done else ""
        super().__init__(
            f"the command's deadline ({deadline.describe()}) passed while {step}{finished}: stopped",
            tip="Give it more time with --timeout SECONDS (or ENVCHECK_TIMEOUT).",
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Deadline:
    """When all the work of one command must be over: ``at`` on the ``time.monotonic`` clock, ``seconds``
    the budget it was made with (``--timeout``). Shared by every target the command starts, reruns
    included, and by envcheck's own work, so ``--timeout`` bounds the command, not each step."""

    at: float
    seconds: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        """The deadline ``seconds`` from now."""
        return cls(at=time.monotonic() + seconds, seconds=seconds)

    @classmethod
    def never(cls) -> Deadline:
        """No deadline (a library caller that gave none)."""
        return cls(at=math.inf, seconds=math.inf)

    def remaining(self) -> float:
        """Seconds left, 0.0 once passed."""
        return max(0.0, self.at - time.monotonic())

    def expired(self) -> bool:
        return self.remaining() <= 0.0

    def earliest(self, other: Deadline) -> Deadline:
        return self if self.at <= other.at else other

    def within(self, seconds: float) -> Deadline:
        """The earlier of this deadline and ``seconds`` from now: a step's own cap inside the command's."""
        return self.earliest(Deadline(at=time.monotonic() + seconds, seconds=self.seconds))

    def for_own_work(self) -> Deadline:
        """This deadline plus ``OWN_WORK_GRACE_S``: for envcheck's reading of what its targets left."""
        return Deadline(at=self.at + OWN_WORK_GRACE_S, seconds=self.seconds)

    def check(self, step: str, done: str | None = None) -> None:
        """Raise ``DeadlineExpired`` (naming ``step`` and what was ``done``) once the deadline has passed."""
        if self.expired():
            raise DeadlineExpired(step, self, done)

    def describe(self) -> str:
        return "none" if math.isinf(self.seconds) else f"--timeout {self.seconds:g} s"
