"""The load generator of ``bench/served_overload.py``: a cheap HTTP/1.1 client in its own process.

    python bench/served_overload_client.py --port P --path /v2/models/M/infer --body-file B \\
        --mode open --rate 800 --seconds 6 --seed 1 --out OUT.npz

One thread, one ``selectors`` (epoll) loop over raw non-blocking sockets; no HTTP library.  Every
request is the same pre-built ``POST`` (headers and body as bytes), so a send costs one
``socket.send`` and an answer one header scan.

* ``--mode open``: open loop.  Send times are a seeded Poisson process at ``--rate`` req/s over
  ``--seconds``, fixed in advance; a request goes out at its time whatever the answers do.  It takes
  an idle keep-alive connection (the most recently used), else opens a new one, up to
  ``--max-conns``; past that cap it is pipelined behind the requests already on a connection
  (HTTP/1.1 allows it; uvicorn answers in order) and counted as ``pipelined``.
* ``--mode closed``: ``--concurrency`` connections, each sending its next request as soon as its
  answer arrives, for ``--seconds`` (the capacity probe).

After the last send it waits for the answers still due, at most ``--tail`` seconds past the last
request's deadline (send + ``--slo``), then closes every connection: what is still unanswered has
status 0.  A connection the server closes with requests on it leaves them at status 0 too.

Output (``--out``, ``.npz``): per request ``sched_s`` (its planned send time, from the start),
``send_s`` (when it was written), ``answer_s`` (when its answer was read in full; NaN: none),
``status`` (HTTP status; 0: no answer) and ``verdict`` (``X-Pard-Outcome``: 1 on_time, 2 late, 0
absent); and ``meta`` (a JSON string): the client's own CPU seconds (``resource.getrusage``, user
and system, over the send-and-wait loop only), its wall time, connections opened, pipelined sends,
connection resets.
"""

from __future__ import annotations

import argparse
import collections
import errno
import json
import random
import resource
import selectors
import socket
import sys
import time
from pathlib import Path

import numpy as np

READ, WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE
ON_TIME, LATE = 1, 2


def request_bytes(host: str, path: str, body: bytes) -> bytes:
    """The one HTTP/1.1 POST every send writes (keep-alive, JSON body)."""
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode("ascii")
    return head + body


def poisson_schedule(rate: float, seconds: float, seed: int) -> list[float]:
    """Send times (s from the start) of a Poisson process at ``rate`` req/s over ``[0, seconds)``."""
    rng = random.Random(seed)
    times, t = [], rng.expovariate(rate)
    while t < seconds:
        times.append(t)
        t += rng.expovariate(rate)
    return times


#: A connection idle this long is closed, not reused: servers close idle keep-alive connections (uvicorn and
#: `pard serve` after 5 s), and a request written just as the server closes its connection is lost unanswered.
STALE_S = 3.0


class Conn:
    """One keep-alive connection: bytes still to write, bytes read, and the requests awaiting answers."""

    __slots__ = ("sock", "out", "inbuf", "pending", "open", "need", "head", "idle_since")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.out = b""                      # request bytes not yet written
        self.inbuf = bytearray()
        self.pending: collections.deque[int] = collections.deque()  # request ids, in send order
        self.open = True
        self.need = -1                      # bytes of the answer being read (-1: its header not yet seen)
        self.head = (0, 0)                  # (status, verdict) of the answer being read
        self.idle_since = 0.0               # when its last answer was read (monotonic s)


def parse_head(head: bytes) -> tuple[int, int, int]:
    """(status, content length, verdict) of one response header block (without the blank line)."""
    status = int(head[9:12])
    lower = head.lower() + b"\r\n"
    length = verdict = 0
    i = lower.find(b"\r\ncontent-length:")
    if i >= 0:
        length = int(lower[i + 17:lower.find(b"\r\n", i + 2)])
    j = lower.find(b"\r\nx-pard-outcome:")
    if j >= 0:
        value = lower[j + 17:lower.find(b"\r\n", j + 2)].strip()
        verdict = ON_TIME if value == b"on_time" else LATE if value == b"late" else 0
    return status, length, verdict


class LoadClient:
    """The selectors loop: sends, reads answers, records them per request (see the module docstring)."""

    def __init__(self, host: str, port: int, request: bytes, max_conns: int) -> None:
        self.addr = (host, port)
        self.request = request
        self.max_conns = max_conns
        self.sel = selectors.DefaultSelector()
        self.idle: list[Conn] = []          # a stack: the most recently used connection first
        self.busy_cursor = 0
        self.conns: list[Conn] = []         # the open ones
        self.t0 = time.monotonic()          # the run's start; every recorded time is relative to it
        self.opened = self.pipelined = self.resets = self.max_open = 0
        self.sched: list[float] = []
        self.send: list[float] = []
        self.answer: list[float] = []
        self.status: list[int] = []
        self.verdict: list[int] = []
        self.on_answer = None               # closed loop: called with the connection that just got one

    # ------------------------------------------------------------------ connections
    def _open(self) -> Conn:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        err = sock.connect_ex(self.addr)
        if err not in (0, errno.EINPROGRESS):
            sock.close()
            raise OSError(err, f"connect to {self.addr}: {errno.errorcode.get(err, err)}")
        conn = Conn(sock)
        self.sel.register(sock, READ | WRITE, conn)  # writable once connected
        self.conns.append(conn)
        self.opened += 1
        self.max_open = max(self.max_open, len(self.conns))
        return conn

    def _close(self, conn: Conn) -> None:
        if not conn.open:
            return
        conn.open = False
        self.sel.unregister(conn.sock)
        conn.sock.close()
        if conn.pending:
            self.resets += 1
        conn.pending.clear()
        self.conns.remove(conn)  # O(open connections), once per closed connection

    def _pick(self) -> Conn:
        """An idle connection, else a new one, else (at the cap) the next busy one, round robin."""
        now = time.monotonic()
        while self.idle:
            conn = self.idle.pop()
            if conn.open and now - conn.idle_since < STALE_S:
                return conn
            self._close(conn)  # idle long enough that the server may be closing it as we write: a new one
        if len(self.conns) < self.max_conns:
            return self._open()
        self.pipelined += 1
        self.busy_cursor = (self.busy_cursor + 1) % len(self.conns)
        return self.conns[self.busy_cursor]

    # ------------------------------------------------------------------ sending and reading
    def send_one(self, sched_s: float, now: float, conn: Conn | None = None) -> None:
        rid = len(self.send)
        self.sched.append(sched_s)
        self.send.append(now)
        self.answer.append(float("nan"))
        self.status.append(0)
        self.verdict.append(0)
        conn = conn or self._pick()
        conn.pending.append(rid)
        if conn.out:
            conn.out += self.request
            return
        try:
            n = conn.sock.send(self.request)
        except (BlockingIOError, InterruptedError):
            n = 0
        except OSError:  # reset under our feet: its requests get no answer
            self._close(conn)
            return
        if n < len(self.request):
            conn.out = self.request[n:]
            self.sel.modify(conn.sock, READ | WRITE, conn)

    def _flush(self, conn: Conn) -> None:
        if conn.out:
            try:
                n = conn.sock.send(conn.out)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self._close(conn)
                return
            conn.out = conn.out[n:]
        if not conn.out:
            self.sel.modify(conn.sock, READ, conn)

    def _read(self, conn: Conn, now: float) -> None:
        try:
            data = conn.sock.recv(262144)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # the server closed it (keep-alive timeout, or a reset)
            self._close(conn)
            return
        buf = conn.inbuf
        buf += data
        while True:
            if conn.need < 0:
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    return
                status, length, verdict = parse_head(bytes(buf[:end]))
                del buf[:end + 4]
                conn.need, conn.head = length, (status, verdict)
            if len(buf) < conn.need:
                return
            del buf[:conn.need]
            conn.need = -1
            if not conn.pending:  # an answer to nothing: should not happen
                continue
            rid = conn.pending.popleft()
            self.status[rid], self.verdict[rid] = conn.head
            self.answer[rid] = now - self.t0
            if not conn.pending and not conn.out:
                if self.on_answer is not None:
                    self.on_answer(conn, now)
                else:
                    conn.idle_since = now
                    self.idle.append(conn)

    def poll(self, timeout: float) -> None:
        for key, mask in self.sel.select(max(0.0, timeout)):
            conn = key.data
            if not conn.open:
                continue
            if mask & WRITE:
                self._flush(conn)
            if mask & READ and conn.open:
                self._read(conn, time.monotonic())

    def outstanding(self) -> int:
        return sum(len(c.pending) for c in self.conns)

    def close_all(self) -> None:
        for conn in list(self.conns):
            self._close(conn)
        self.sel.close()

    # ------------------------------------------------------------------ the two modes
    def run_open(self, schedule: list[float], slo: float, tail: float) -> float:
        """Send at ``schedule`` (s from now); returns the loop's start (monotonic s)."""
        t0 = self.t0 = time.monotonic()
        i, n = 0, len(schedule)
        while i < n:
            now = time.monotonic()
            while i < n and t0 + schedule[i] <= now:
                self.send_one(schedule[i], now - t0)
                i += 1
            if i < n:
                self.poll(t0 + schedule[i] - time.monotonic())
        self._wait_answers(t0, slo, tail)
        return t0

    def run_closed(self, concurrency: int, seconds: float, slo: float, tail: float) -> float:
        t0 = self.t0 = time.monotonic()
        end = t0 + seconds

        def again(conn: Conn, now: float) -> None:
            if now < end:
                self.send_one(now - t0, now - t0, conn)

        self.on_answer = again
        for _ in range(concurrency):
            self.send_one(0.0, time.monotonic() - t0, self._open())
        while time.monotonic() < end:
            self.poll(end - time.monotonic())
        self._wait_answers(t0, slo, tail)
        return t0

    def _wait_answers(self, t0: float, slo: float, tail: float) -> None:
        give_up = t0 + (max(self.send) if self.send else 0.0) + slo + tail
        while self.outstanding() and time.monotonic() < give_up:
            self.poll(min(0.05, give_up - time.monotonic()))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--path", required=True, help="the infer route, e.g. /v2/models/tm/infer")
    p.add_argument("--body-file", type=Path, required=True, help="the v2 JSON request body")
    p.add_argument("--mode", choices=("open", "closed"), default="open")
    p.add_argument("--rate", type=float, default=100.0, help="open loop: mean req/s (Poisson)")
    p.add_argument("--concurrency", type=int, default=32, help="closed loop: connections, one request each")
    p.add_argument("--seconds", type=float, default=6.0)
    p.add_argument("--slo", type=float, required=True, help="s; a request's deadline is its send + this")
    p.add_argument("--tail", type=float, default=10.0, help="s past the last deadline to wait for answers")
    p.add_argument("--max-conns", type=int, default=2000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args(argv)

    request = request_bytes(a.host, a.path, a.body_file.read_bytes())
    client = LoadClient(a.host, a.port, request, a.max_conns)
    schedule = poisson_schedule(a.rate, a.seconds, a.seed) if a.mode == "open" else []
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    w0 = time.monotonic()
    if a.mode == "open":
        client.run_open(schedule, a.slo, a.tail)
    else:
        client.run_closed(a.concurrency, a.seconds, a.slo, a.tail)
    wall = time.monotonic() - w0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    unanswered = client.outstanding()
    client.close_all()
    meta = {"mode": a.mode, "rate": a.rate, "seconds": a.seconds, "concurrency": a.concurrency,
            "cpu_user_s": r1.ru_utime - r0.ru_utime, "cpu_sys_s": r1.ru_stime - r0.ru_stime, "wall_s": wall,
            "connections_opened": client.opened, "max_open": client.max_open, "pipelined": client.pipelined,
            "resets": client.resets, "unanswered_at_end": unanswered, "request_bytes": len(request)}
    np.savez(a.out, sched_s=np.asarray(client.sched), send_s=np.asarray(client.send),
             answer_s=np.asarray(client.answer, dtype=float), status=np.asarray(client.status, dtype=np.int16),
             verdict=np.asarray(client.verdict, dtype=np.int8), meta=np.asarray(json.dumps(meta)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
