"""The OS priority of a server's threads: forward passes at the normal priority, page scripts below it.

A server runs each page's script in a thread of its own, next to the forward passes. On a small
machine a room of pages takes the cores a pass needs, and a student waiting for a first token
waits for everyone's page. Linux gives every thread its own nice value, so a server may run its
page scripts "nicer" and each pass at the normal priority (:func:`normal_priority`, used by
:class:`~engine.runtime.batching.StepBatcher`, and to start the app's model worker: a process keeps the
nice value of the thread that starts it). But only a process allowed to lower a nice value again
(root, or a high enough ``RLIMIT_NICE``) can give a pass's thread its priority back, so a server
lowers its scripts only where :func:`can_restore_priority` holds. Elsewhere nothing changes.
"""

from __future__ import annotations

import os
import resource
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager


def thread_nice() -> int:
    """The calling thread's nice value (0 where threads have none of their own)."""
    if not sys.platform.startswith("linux"):
        return 0
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def set_thread_nice(value: int) -> bool:
    """Set the calling thread's nice value; False where that is not allowed or not supported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), value)
    except OSError:
        return False
    return True


def can_restore_priority() -> bool:
    """Whether this process may lower a thread's nice value back to 0."""
    if not sys.platform.startswith("linux"):
        return False
    if os.geteuid() == 0:
        return True
    soft, _hard = resource.getrlimit(resource.RLIMIT_NICE)  # the lowest nice allowed is 20 - soft
    return soft == resource.RLIM_INFINITY or soft >= 20


@contextmanager
def normal_priority() -> Iterator[None]:
    """Run the block at nice 0, then give the thread its own nice value back (no-op for a thread at 0)."""
    before = thread_nice()
    raised = before > 0 and set_thread_nice(0)
    try:
        yield
    finally:
        if raised:
            set_thread_nice(before)
