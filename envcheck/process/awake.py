"""Waits that leave the main thread awake to signals: a worker thread's result, its end, a pool of them.

SIGINT and SIGTERM are sent to the process, and the kernel hands them to whichever thread does not block
them, most often, but not always, the main one. Python runs its signal handlers in the main thread only,
and only when that thread runs Python code: a main thread blocked in ``Future.result()`` or
``Thread.join()`` while the signal landed in a worker sleeps on until the worker is done, which is up to the
command's whole ``--timeout`` when the worker waits on a tool that never answers. (CI caught
``predict --resolver uv`` ignoring a Ctrl-C for the 60 s of its deadline that way.)

Here every wait is cut into slices of ``POLL_S``: between two slices the main thread runs the interrupt
handler (``envcheck.process.sessions``) if a signal came, wherever it landed. Every module outside
``envcheck.inside`` waits on threads through this one (``tests/test_architecture.py``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

from envcheck.process.sessions import POLL_S

T = TypeVar("T")


def result(future: Future[T]) -> T:
    """``future.result()``, waited for in slices (a worker's own ``TimeoutError`` is re-raised, not taken
    for the end of a slice)."""
    _until_done(future)
    return future.result()


def join(thread: threading.Thread, timeout: float | None = None) -> bool:
    """``thread.join(timeout)``, waited for in slices; True when the thread has ended."""
    ends = None if timeout is None else time.monotonic() + max(0.0, timeout)
    while thread.is_alive():
        left = POLL_S if ends is None else min(POLL_S, ends - time.monotonic())
        if left <= 0:
            return False
        thread.join(left)
    return True


class Pool(ThreadPoolExecutor):
    """A ``ThreadPoolExecutor`` whose waits are sliced: ``map``'s results and the wait at ``shutdown`` (the
    end of a ``with`` block, an error's too) leave the main thread awake. Use ``result`` for what
    ``submit`` returns."""

    def __init__(self, max_workers: int) -> None:
        super().__init__(max_workers, thread_name_prefix="envcheck-worker")

    def map(  # type: ignore[override]
        self, fn: Callable[..., T], *iterables: Iterable[Any], timeout: None = None, chunksize: int = 1
    ) -> Iterator[T]:
        """Every call submitted now (as ``ThreadPoolExecutor.map``), the results yielded in order."""
        futures = [self.submit(fn, *args) for args in zip(*iterables, strict=False)]

        def results() -> Iterator[T]:
            try:
                for future in futures:
                    yield result(future)
            finally:
                for future in futures:
                    future.cancel()

        return results()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        # The pool's own end (each worker leaves once its running call is done), then the wait for its
        # workers, in slices.
        super().shutdown(wait=False, cancel_futures=cancel_futures)
        if wait:
            for thread in list(self._threads):
                join(thread)

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        # After an exception the calls not yet started never start; the running ones are waited for (in
        # slices), so that none outlives the block: after an interrupt their targets are already ended
        # (``sessions.kill_all``), and they end at once; a second signal ends envcheck even so.
        self.shutdown(wait=True, cancel_futures=kind is not None)


def _until_done(future: Future[Any]) -> None:
    while not future.done():
        wait((future,), timeout=POLL_S, return_when=FIRST_COMPLETED)
