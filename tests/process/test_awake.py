"""``envcheck.process.awake``: the main thread's waits on worker threads, cut in slices so that a signal
the kernel handed to a worker is still acted on at once (Python runs handlers in the main thread only).

The signal is sent with ``pthread_kill`` to the worker itself: the case the kernel produces now and then
for a signal sent to the process (``tests/process/test_interrupt.py`` does that end to end)."""

from __future__ import annotations

import subprocess
import sys
import threading
from concurrent.futures import CancelledError

import pytest

from envcheck.process import awake

# The worker sleeps far longer than the bound: only the signal, acted on at once, ends the run in time.
_SCRIPT = r"""
import os, signal, sys, threading, time
from envcheck.process import awake

mode = sys.argv[1]
go = threading.Event()
if mode != "exit":
    go.set()

def main_thread_asleep():
    stat = "/proc/self/task/%d/stat" % threading.main_thread().native_id
    with open(stat) as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "S"

release = threading.Event()  # set once the main thread has the interrupt

def work(*_):
    go.wait()
    while not main_thread_asleep():  # it waits on this thread now: the signal must wake it
        time.sleep(0.01)
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # this worker takes the signal
    release.wait(120)

try:
    if mode == "result":
        awake.result(awake.Pool(1).submit(work))
    elif mode == "join":
        thread = threading.Thread(target=work, daemon=True)
        thread.start()
        awake.join(thread)
    elif mode == "join-bounded":  # rank 0's wait on its snapshot: torchrun's SIGTERM in that thread
        thread = threading.Thread(target=work, daemon=True)
        thread.start()
        awake.join(thread, 100.0)
    elif mode == "map":  # the pool's end waits for the running call: it ends once released
        with awake.Pool(1) as pool:
            try:
                list(pool.map(work, [1]))
            except KeyboardInterrupt:
                release.set()
                raise
    elif mode == "exit":  # the with block fails while its worker runs: the wait at its end
        with awake.Pool(1) as pool:
            pool.submit(work)
            go.set()
            raise ValueError("the block failed")
    print("not interrupted")
except KeyboardInterrupt:
    print("interrupted")
sys.stdout.flush()
os._exit(0)
"""


@pytest.mark.parametrize("mode", ["result", "join", "join-bounded", "map", "exit"])
def test_a_signal_a_worker_took_interrupts_the_main_threads_wait(mode: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, mode], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.strip() == "interrupted", done.stderr


def test_a_workers_own_timeout_error_is_its_result_not_the_end_of_a_slice() -> None:
    def late() -> None:
        raise TimeoutError("the worker's own")

    with awake.Pool(1) as pool, pytest.raises(TimeoutError, match="the worker's own"):
        awake.result(pool.submit(late))


def test_map_gives_results_in_order_and_the_first_error() -> None:
    def square(n: int) -> int:
        if n == 7:
            raise ValueError("seven")
        return n * n

    with awake.Pool(3) as pool:
        assert list(pool.map(square, range(7))) == [n * n for n in range(7)]
        with pytest.raises(ValueError, match="seven"):
            list(pool.map(square, range(10)))


def test_after_an_error_in_the_block_the_calls_not_started_never_start() -> None:
    release = threading.Event()
    ran: list[int] = []

    def job(n: int) -> None:
        release.wait(30)
        ran.append(n)

    futures = []
    with pytest.raises(RuntimeError, match="the block failed"), awake.Pool(1) as pool:
        futures = [pool.submit(job, n) for n in range(5)]
        threading.Timer(0.2, release.set).start()  # the running one ends; the others are cancelled
        raise RuntimeError("the block failed")
    assert ran == [0]
    for future in futures[1:]:
        with pytest.raises(CancelledError):
            future.result()


def test_a_bounded_join_says_whether_the_thread_ended() -> None:
    release = threading.Event()
    thread = threading.Thread(target=release.wait, args=(30,), daemon=True)
    thread.start()
    assert awake.join(thread, 0.1) is False
    assert awake.join(thread, -1.0) is False
    release.set()
    assert awake.join(thread, 30.0) is True
