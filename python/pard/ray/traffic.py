"""The driver's two threads of traffic with the stage actors: the sender and the poller.

* :class:`Sender` -- ``submit`` queues ``(id, send, deadline, tier, payload)``; the sender puts the
  payloads queued meanwhile into *groups* (:func:`grouped`: one Ray object per group, so Ray's cost
  per object is paid per group, not per request) and ships their keys in one ``enqueue`` call per
  entry stage.  The next call carries whatever was submitted while the previous ones travelled (at
  most :data:`SENDS_IN_FLIGHT` calls in flight per entry stage), so under load one call carries many
  requests and at light load a request waits for no batch to fill.
* :class:`Poller` -- keeps one long-poll ``events`` call open per stage actor; each reply (the
  drops, failures, finishes and compute shares of any number of batches) goes to a handler, which
  returns the ``(id, deadline)`` pairs every stage must forget (sibling DAG branches); those go out
  as one ``forget`` call per stage per reply.  :func:`fetch` brings exit outputs to the driver in
  one ``ray.get`` per reply.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import ray

__all__ = ["Sender", "Poller", "grouped", "fetch", "Lost", "GROUP_BYTES", "INLINE_BYTES", "SENDS_IN_FLIGHT"]

#: A group holds at most this many bytes of payload (``nbytes``), so an entry batch never fetches
#: much more than its own payloads; a larger payload is a group of its own.
GROUP_BYTES = 1 << 20
#: A group smaller than this travels inline in the ``enqueue`` call and the stage's ``run`` call
#: rather than through the object store -- Ray's own rule for small task results
#: (``max_direct_call_object_size``, 100 KiB): for small payloads the shared-memory store costs more
#: (a put, then a fetch before the batch can start: ~5 ms per batch measured on a busy 2-core
#: machine, docs/ray.md) than carrying the bytes twice.
INLINE_BYTES = 100 * 1024
#: Enqueue calls in flight per entry stage before the sender waits for the oldest.
SENDS_IN_FLIGHT = 2


def grouped(items: Sequence[tuple[int, float, float, int, Any]]) -> tuple[list[tuple[Any, ...]], list[Any]]:
    """Group the payloads of ``items``; returns the ``enqueue`` keys ``(id, send, deadline, tier,
    arrival = send, group, position)`` and the groups (a list inline, or an ObjectRef)."""
    keys: list[tuple[Any, ...]] = []
    groups: list[Any] = []
    chunk: list[Any] = []
    size = 0
    for rid, send, deadline, tier, payload in items:
        nbytes = int(getattr(payload, "nbytes", 0) or 0)
        if chunk and size + nbytes > GROUP_BYTES:
            groups.append(_stored(chunk, size))
            chunk, size = [], 0
        keys.append((rid, send, deadline, tier, send, len(groups), len(chunk)))
        chunk.append(payload)
        size += nbytes
    if chunk:
        groups.append(_stored(chunk, size))
    return keys, groups


def _stored(chunk: list[Any], nbytes: int) -> Any:
    return chunk if nbytes < INLINE_BYTES else ray.put(chunk)


class Lost:
    """An output that could not be fetched (its node or owner died)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


def fetch(refs: list[Any]) -> list[Any]:
    """The values of ``refs`` in one ``ray.get``; one by one, as :class:`Lost` where that fails."""
    try:
        return list(ray.get(refs, timeout=60.0))
    except Exception:  # noqa: BLE001 - find which ones are lost
        out: list[Any] = []
        for r in refs:
            try:
                out.append(ray.get(r, timeout=10.0))
            except Exception as e:  # noqa: BLE001
                out.append(Lost(e))
        return out


class Sender:
    """The sender thread (module doc).  ``put`` queues one request; ``stop`` ends it once the queue is empty."""

    def __init__(self, entries: Sequence[Any], calls: dict[str, int]) -> None:
        self._entries = list(entries)
        self._calls = calls
        self._outbox: list[tuple[int, float, float, int, Any]] = []
        self._cv = threading.Condition(threading.Lock())
        self._stop = False
        self._thread = threading.Thread(target=self._loop, name="pard-ray-sender", daemon=True)
        self._thread.start()

    def put(self, item: tuple[int, float, float, int, Any]) -> None:
        with self._cv:
            self._outbox.append(item)
            self._cv.notify()

    def stop(self, timeout_s: float = 10.0) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        self._thread.join(timeout_s)

    def _loop(self) -> None:
        inflight: list[list[Any]] = []  # enqueue calls sent and not yet answered, oldest first
        while True:
            with self._cv:
                while not self._outbox and not self._stop:
                    self._cv.wait(0.5)
                if not self._outbox:
                    return
                items, self._outbox = self._outbox, []
            if len(inflight) >= SENDS_IN_FLIGHT:  # this call carries what queued meanwhile
                ray.wait(inflight[0], num_returns=len(inflight[0]), timeout=30.0)
                inflight.pop(0)
            keys, groups = grouped(items)
            inflight.append([s.enqueue.remote(keys, groups, -1) for s in self._entries])
            self._calls["enqueue"] += len(self._entries)
            self._calls["groups"] += len(groups)


class Poller:
    """The poller thread (module doc): ``handle(stage index, events) -> forgets`` for every reply."""

    def __init__(self, stages: Sequence[Any], handle: Callable[[int, list[Any]], list[tuple[int, float]]],
                 calls: dict[str, int]) -> None:
        self._stages = list(stages)
        self._handle = handle
        self._calls = calls
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="pard-ray-poller", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        self._thread.join(timeout_s)

    def _loop(self) -> None:
        polls = {s.events.remote(): k for k, s in enumerate(self._stages)}
        while polls:
            ready, _ = ray.wait(list(polls), num_returns=1, timeout=0.2)
            forgets: list[tuple[int, float]] = []
            for ref in ready:
                k = polls.pop(ref)
                try:
                    events = ray.get(ref)
                except Exception:  # noqa: BLE001 - the stage actor is gone (closing): stop polling it
                    continue
                self._calls["events"] += 1
                forgets.extend(self._handle(k, events))
                if not self._stop.is_set():
                    polls[self._stages[k].events.remote()] = k
            if self._stop.is_set() and not ready:
                return
            if forgets:
                for s in self._stages:
                    s.forget.remote(forgets)
                self._calls["forget"] += len(self._stages)
