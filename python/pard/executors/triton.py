"""Triton executor: run each batch pard forms on a Triton Inference Server model (extra ``pard[triton]``).

PARD is a thin layer over an existing serving stack (DESIGN §1): pard's scheduler decides which
requests form a batch and which are dropped; the server only executes the batch.  So the server must
not re-batch or delay what pard sends: the model's config needs ``max_batch_size`` equal to the
stage's ``max_batch`` and no dynamic-batcher queue delay (``max_queue_delay_microseconds: 0`` or no
``dynamic_batching`` block).  :class:`TritonExecutor` checks both when it starts and raises
:class:`pard.ConfigError` naming the model, the field and the values otherwise.

Each call sends one gRPC request with the whole batch through ``tritonclient.grpc.aio`` on an event
loop thread the executor owns (so every worker thread of the stage has its request in flight at the
same time on one channel), with the client timeout set to the batch's remaining latency budget
(pard passes it, see :attr:`~pard.executors.base.BatchExecutor.accepts_budget`): a result that
comes after every request's deadline is worthless.  A server error or a timeout raises
:class:`pard.ExecutorError`, which the runtime turns into ``failed`` requests for that batch only;
the worker is never left waiting (the wait is bounded by the timeout plus a grace period).

When the server is on this host (a loopback URL), the batch's input goes through a system
shared-memory region per worker thread, registered with the server, instead of over the socket.

Neighbours: :mod:`.base` (hooks, stacking); ``tests/_pytriton.py`` starts a real server for tests.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import os
import threading
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from .._extras import require
from ..errors import ConfigError, ExecutorError, PardValueError
from .base import BatchExecutor, split_rows, stack_payloads

__all__ = ["TritonExecutor", "MODEL_CONFIG_EXAMPLE"]

#: The model config pard expects, for a stage with ``max_batch: 16`` (config.pbtxt).
MODEL_CONFIG_EXAMPLE = """\
max_batch_size: 16            # = the stage's max_batch: pard forms batches of 1..16
dynamic_batching {
  max_queue_delay_microseconds: 0   # no waiting in Triton: pard already formed the batch
}
instance_group [{ count: 1 }]  # or one per pard worker of the stage
"""

_LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}
_REGION_IDS = itertools.count()  # region names stay unique in this process, disposed ones included
# extra seconds the worker waits beyond the client timeout before it gives up on the gRPC call
_GRACE_S = 1.0


def _client_modules() -> tuple[Any, Any, Any]:
    return tuple(require(m, "triton", "TritonExecutor")  # type: ignore[return-value]
                 for m in ("tritonclient.grpc", "tritonclient.grpc.aio", "tritonclient.utils"))


def _host(url: str) -> str:
    return (urlsplit(url if "//" in url else f"//{url}").hostname or "").lower()


class TritonExecutor(BatchExecutor):
    """Execute a stage's batches on a Triton Inference Server model over gRPC.

    Args:
        url: the server's gRPC endpoint, ``host:port`` (e.g. ``"127.0.0.1:8001"``).
        model: the model's name on the server.
        model_version: the version ("" = the server's policy, usually the latest).
        max_batch: the stage's ``max_batch``, checked against the model config now; otherwise
            checked when the runtime binds the executor to its stage (:meth:`bind`).
        input_name, output_name: the model input that gets the batch and the output returned;
            default the model's only input and its first output.
        timeout_s: the client timeout when no budget is known (e.g. while profiling), and the
            largest one used (s, > 0; default 30).
        min_timeout_s: the smallest client timeout (s, > 0; default 1 ms): a batch whose requests
            are all past their deadline still gets this long.
        budget_timeout: use the batch's remaining budget as the client timeout (default True);
            False: always ``timeout_s``, so a batch that overruns its deadlines ends ``late``
            instead of ``failed`` (e.g. to count late results).
        shared_memory: ``"auto"`` (default: system shared memory for the input when the URL is a
            loopback address, falling back to the socket if the server refuses it), ``"on"``
            (required; ConfigError if the server refuses), ``"off"``.
        headers: extra gRPC headers for every call (e.g. an access token for restricted
            protocols such as shared memory).
        startup_timeout_s: how long to wait for the model to become ready (s, default 30).
        name: label for messages (default the model name).

    Calling it with ``B`` payloads (``1 <= B <= max_batch_size``, array-likes of the input's
    shape) returns ``B`` NumPy rows of the output.  ``budget_s`` (keyword, passed by the runtime)
    is the batch's remaining budget; the client timeout is ``min(timeout_s, max(budget_s,
    min_timeout_s))``.

    Raises:
        pard.errors.MissingExtraError (an ImportError): tritonclient is not installed.
        pard.ConfigError (at construction or :meth:`bind`): the server or model is not ready in
            time, the model does not batch (``max_batch_size`` 0), its config delays batches
            (``max_queue_delay_microseconds`` > 0), ``max_batch_size`` differs from the stage's
            ``max_batch``, unknown input/output names, bad arguments.
        pard.ExecutorError (at call time): the server returned an error or did not answer within
            the timeout; ValueError: payloads of differing shapes or more than ``max_batch_size``.
    """

    accepts_budget = True

    def __init__(
        self,
        url: str,
        model: str,
        *,
        model_version: str = "",
        max_batch: int | None = None,
        input_name: str | None = None,
        output_name: str | None = None,
        timeout_s: float = 30.0,
        min_timeout_s: float = 0.001,
        budget_timeout: bool = True,
        shared_memory: str = "auto",
        headers: Mapping[str, str] | None = None,
        startup_timeout_s: float = 30.0,
        name: str | None = None,
    ) -> None:
        for arg, v in (("timeout_s", timeout_s), ("min_timeout_s", min_timeout_s), ("startup_timeout_s", startup_timeout_s)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (np.isfinite(v) and v > 0):
                raise ConfigError(f"TritonExecutor: {arg} must be a finite number of seconds > 0, got {v!r}")
        if shared_memory not in ("auto", "on", "off"):
            raise ConfigError(f"TritonExecutor: shared_memory must be 'auto', 'on' or 'off', got {shared_memory!r}")
        if not isinstance(url, str) or not url:
            raise ConfigError(f"TritonExecutor: url must be 'host:port', got {url!r}")
        grpc, aio, utils = _client_modules()
        self._grpc, self._aio, self._utils = grpc, aio, utils
        self.url, self.model, self.model_version = url, str(model), str(model_version)
        self.name = name or self.model
        self.timeout_s, self.min_timeout_s = float(timeout_s), float(min_timeout_s)
        self.accepts_budget = bool(budget_timeout)
        self._headers = dict(headers or {})
        self._sync = grpc.InferenceServerClient(url)
        self._wait_ready(float(startup_timeout_s))
        cfg = self._sync.get_model_config(self.model, self.model_version, headers=self._headers, as_json=True)
        self.config: dict[str, Any] = dict(cfg.get("config", cfg))
        self.max_batch_size = self._check_config(self.config, max_batch, what="max_batch")
        meta = self._sync.get_model_metadata(self.model, self.model_version, headers=self._headers, as_json=True)
        self._pick_tensors(meta, input_name, output_name)
        # worker thread -> (region name, shm handle, byte size); every region, for close()
        self._local = threading.local()
        self._regions: list[tuple[str, Any]] = []
        self._lock = threading.Lock()
        self._closed = False
        local = _host(url) in _LOCAL_HOSTS
        self.shared_memory = shared_memory == "on" or (shared_memory == "auto" and local)
        self._shm_required = shared_memory == "on"
        #: why ``shared_memory="auto"`` fell back to the socket (the server's refusal), else None
        self.shared_memory_error: str | None = None
        # the event loop that carries every call's gRPC request (the aio client lives on it)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"pard-triton-{self.name}", daemon=True)
        self._thread.start()
        self._client = self._submit(self._make_client()).result(timeout=startup_timeout_s)
        if self.shared_memory:
            self._probe_shared_memory()

    # ------------------------------------------------------------------ start-up
    def _wait_ready(self, limit_s: float) -> None:
        end = time.monotonic() + limit_s
        last: Any = None
        while True:
            try:
                if self._sync.is_model_ready(self.model, self.model_version, headers=self._headers):
                    return
                last = "the server answers but reports the model not ready"
            except Exception as exc:  # noqa: BLE001 - connection refused while the server starts
                last = exc
            if time.monotonic() >= end:
                raise ConfigError(f"TritonExecutor: model {self.model!r} on the Triton server at {self.url} was not "
                                  f"ready within startup_timeout_s={limit_s:g} s (last: {last})")
            time.sleep(0.1)

    def _check_config(self, config: Mapping[str, Any], max_batch: int | None, *, what: str) -> int:
        """The model's ``max_batch_size``; ConfigError when the config would hide pard's decisions."""
        mbs = int(config.get("max_batch_size", 0) or 0)
        hint = f"use a config such as:\n{MODEL_CONFIG_EXAMPLE}"
        if mbs < 1:
            raise ConfigError(f"TritonExecutor: model {self.model!r} has max_batch_size {mbs}: it does not batch, "
                              f"but pard sends whole batches; {hint}")
        dyn = config.get("dynamic_batching")
        delay = int((dyn or {}).get("max_queue_delay_microseconds", 0) or 0)
        if delay > 0:
            raise ConfigError(f"TritonExecutor: model {self.model!r} has dynamic_batching.max_queue_delay_microseconds "
                              f"{delay}: Triton would hold pard's batches up to {delay} us to merge them, hiding "
                              f"pard's batching and drop decisions; set it to 0; {hint}")
        if max_batch is not None and int(max_batch) != mbs:
            raise ConfigError(f"TritonExecutor: model {self.model!r} has max_batch_size {mbs} but the stage's {what} is "
                              f"{int(max_batch)}: they must be equal, so Triton runs exactly the batches pard forms; "
                              f"{hint}")
        return mbs

    def _pick_tensors(self, meta: Mapping[str, Any], input_name: str | None, output_name: str | None) -> None:
        inputs, outputs = list(meta.get("inputs", [])), list(meta.get("outputs", []))
        if input_name is None:
            if len(inputs) != 1:
                raise ConfigError(f"TritonExecutor: model {self.model!r} has {len(inputs)} inputs "
                                  f"{[i['name'] for i in inputs]}; say which gets the batch with input_name")
            inp = inputs[0]
        else:
            found = [i for i in inputs if i["name"] == input_name]
            if not found:
                raise ConfigError(f"TritonExecutor: input_name {input_name!r} is not an input of model {self.model!r} "
                                  f"(inputs: {[i['name'] for i in inputs]})")
            inp = found[0]
        names = [o["name"] for o in outputs]
        if not names or (output_name is not None and output_name not in names):
            raise ConfigError(f"TritonExecutor: output_name {output_name!r} is not an output of model {self.model!r} "
                              f"(outputs: {names})")
        self.input_name: str = inp["name"]
        self.output_name: str = output_name or names[0]
        self.datatype: str = inp["datatype"]
        self.dtype = np.dtype(self._utils.triton_to_np_dtype(self.datatype))
        dims = [int(d) for d in inp.get("shape", [])][1:]  # metadata lists the batch axis as -1
        self.payload_shape = tuple(dims) if dims and all(d > 0 for d in dims) else None

    async def _make_client(self) -> Any:
        return self._aio.InferenceServerClient(self.url)

    def _submit(self, coro: Any) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def _probe_shared_memory(self) -> None:
        """Register and drop one small region: a server that refuses shared memory falls back to the socket."""
        try:
            self._dispose(self._new_region(self.dtype.itemsize))
        except Exception as exc:  # noqa: BLE001 - e.g. a server in another container, or a restricted protocol
            if self._shm_required:
                raise ConfigError(f"TritonExecutor(shared_memory='on'): the Triton server at {self.url} refused a "
                                  f"system shared-memory region: {exc}") from exc
            self.shared_memory = False
            self.shared_memory_error = str(exc)

    def bind(self, stage: Any, *, workers: int, threads: int | None = None) -> None:
        """Check that the model's ``max_batch_size`` equals ``stage.max_batch`` (ConfigError naming both)."""
        self._check_config(self.config, int(stage.max_batch), what=f"{stage.name!r} max_batch")

    def __repr__(self) -> str:
        return (f"TritonExecutor({self.url}, model={self.model!r}, max_batch_size={self.max_batch_size}, "
                f"shared_memory={self.shared_memory}, payload_shape={self.payload_shape})")

    # ------------------------------------------------------------------ shared memory
    def _new_region(self, nbytes: int) -> tuple[str, Any, int]:
        shm = self._shm()
        region = f"pard-{os.getpid()}-{id(self):x}-{next(_REGION_IDS)}"
        handle = shm.create_shared_memory_region(region, f"/{region}", nbytes)
        try:
            self._sync.register_system_shared_memory(region, f"/{region}", nbytes, headers=self._headers)
        except Exception:
            shm.destroy_shared_memory_region(handle)
            raise
        with self._lock:
            self._regions.append((region, handle))
        return region, handle, nbytes

    def _dispose(self, entry: tuple[str, Any, int]) -> None:
        region, handle, _ = entry
        with self._lock:
            self._regions = [r for r in self._regions if r[0] != region]
        try:
            self._sync.unregister_system_shared_memory(region, headers=self._headers)
        except Exception:  # noqa: BLE001 - the server may be gone; the local segment is still freed
            pass
        self._shm().destroy_shared_memory_region(handle)

    def _shm(self) -> Any:
        return require("tritonclient.utils.shared_memory", "triton", "TritonExecutor's shared memory")

    def _region(self, nbytes: int, capacity: int) -> tuple[str, Any, int]:
        """This worker thread's region, (re)made with ``capacity`` bytes when it holds fewer than ``nbytes``."""
        entry = getattr(self._local, "region", None)
        if entry is None or entry[2] < nbytes:
            if entry is not None:
                self._dispose(entry)
            entry = self._new_region(max(nbytes, capacity))
            self._local.region = entry
        return entry

    # ------------------------------------------------------------------ calls
    def __call__(self, payloads: list[Any], *, budget_s: float | None = None) -> list[Any]:
        n = len(payloads)
        if n == 0:
            return []
        if self._closed:
            raise ExecutorError(f"TritonExecutor({self.name}) is closed")
        if n > self.max_batch_size:
            raise PardValueError(f"TritonExecutor({self.name}): a batch of {n} exceeds the model's max_batch_size "
                             f"{self.max_batch_size}")
        batch = stack_payloads(payloads, dtype=self.dtype, payload_shape=self.payload_shape,
                               who=f"TritonExecutor({self.name})")
        timeout = self.timeout_s if budget_s is None else min(self.timeout_s, max(float(budget_s), self.min_timeout_s))
        inp = self._grpc.InferInput(self.input_name, list(batch.shape), self.datatype)
        region = None
        if self.shared_memory:
            # sized for a full batch once, so later batches of this worker reuse the region
            region = self._region(int(batch.nbytes), int(batch.nbytes) // n * self.max_batch_size)
            self._shm().set_shared_memory_region(region[1], [batch])
            inp.set_shared_memory(region[0], int(batch.nbytes))
        else:
            inp.set_data_from_numpy(batch)
        out = [self._grpc.InferRequestedOutput(self.output_name)]
        fut = self._submit(self._client.infer(self.model, [inp], model_version=self.model_version, outputs=out,
                                              client_timeout=timeout, headers=self._headers or None))
        try:
            result = fut.result(timeout=timeout + _GRACE_S)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            self._abandon(region)
            raise ExecutorError(f"TritonExecutor({self.name}): no answer from {self.url} within {timeout:.3f} s "
                                f"(+{_GRACE_S:g} s grace)") from None
        except self._utils.InferenceServerException as exc:
            status = str(exc.status() or "")
            if "DEADLINE_EXCEEDED" in status or "Deadline" in str(exc):
                self._abandon(region)
                raise ExecutorError(f"TritonExecutor({self.name}): the batch's timeout of {timeout:.3f} s (its "
                                    f"remaining budget) passed before the server answered") from exc
            raise ExecutorError(f"TritonExecutor({self.name}): the server returned an error: {exc}") from exc
        return split_rows(result.as_numpy(self.output_name), n, f"TritonExecutor({self.name})")

    def _abandon(self, region: tuple[str, Any, int] | None) -> None:
        """After a timeout the server may still read the region: this thread gets a fresh one next time."""
        if region is not None:
            self._local.region = None
            self._dispose(region)

    def close(self) -> None:
        """Close the gRPC channels, stop the event loop thread, unregister and free the shared memory."""
        if self._closed:
            return
        self._closed = True
        try:
            self._submit(self._client.close()).result(timeout=2.0)
        except Exception:  # noqa: BLE001 - closing a broken channel must not raise
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=2.0)
        if not self._thread.is_alive():
            self._loop.close()  # its self-pipe's sockets with it
        for region, handle in list(self._regions):
            self._dispose((region, handle, 0))
        try:
            self._sync.close()
        except Exception:  # noqa: BLE001
            pass

    def __enter__(self) -> TritonExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

