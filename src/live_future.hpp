// The request future of the live runtime (pard.RequestFuture): LiveFuture, the wait shards its
// waiters sleep on, its hooks into Python's cycle collector, and the helpers result() and
// exception() raise with. Resolved by LiveRuntime (live_runtime.hpp) under the GIL; bound by
// register_live.cpp.
#pragma once

#include <pybind11/pybind11.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "pard/live/types.hpp"

namespace pard::bind {

namespace py = pybind11;

// Private to register_live.cpp, its one includer: internal linkage, as in a single source file,
// lets the compiler inline the hot path's single-call functions (LivePipeline::submit into
// fast_submit).
namespace {

// Futures wait on one of these (by request id) with the GIL released; a resolver notifies only
// when someone waits. State changes happen under the GIL; `state` is atomic for the waiters.
struct WaitShard {
    std::mutex mu;
    std::condition_variable cv;
};
std::array<WaitShard, 64>& wait_shards() {
    static std::array<WaitShard, 64> shards;
    return shards;
}

// A request's future: result(), exception(), done(), cancel(), add_done_callback(), request_id.
struct LiveFuture {
    enum : int { kPending = 0, kResult = 1, kError = 2, kCancelled = 3 };
    std::uint64_t key = 0;
    std::atomic<int> state{kPending};
    std::atomic<int> waiters{0};
    py::object owner;  // the LiveRuntime (cancel, the error factory)
    py::object value;  // the result, or the exception once built
    // what the exception is built from, lazily (most drops are never looked at)
    int ostate = 0, stage = 0, reason = -1, kind = 0;
    std::int64_t queued = 0;
    double retry_after_s = 0.0;
    py::object raw;
    std::vector<py::object> callbacks;
    py::object sync;  // the concurrent.futures protocol state, built on first use (pard/runtime/future.py)
    py::object aio;   // the asyncio future awaiting the request, and the LoopSink that settles it
    py::object sink;  // (live_loop_sink.hpp); both unset unless awaited through a sink

    [[nodiscard]] std::uint64_t request_id() const noexcept { return key >> live::kSlotBits; }
    py::object exception_object();
    void wait(py::object timeout);
    void run_callbacks(py::object self) {
        std::vector<py::object> cbs;
        cbs.swap(callbacks);
        for (auto& cb : cbs) {
            call_logged(cb, self);
        }
    }
    // As concurrent.futures.Future does: a callback that raises is logged, not propagated.
    static void call_logged(const py::object& cb, const py::object& self) {
        try {
            cb(self);
        } catch (py::error_already_set& e) {
            try {
                py::module_::import("logging").attr("getLogger")("concurrent.futures")
                    .attr("error")("exception calling callback for %r", self, py::arg("exc_info") = e.value());
            } catch (py::error_already_set& again) {
                again.discard_as_unraisable("pard RequestFuture done-callback");
            }
        }
    }
};

// tp_traverse / tp_clear of LiveFuture (py::custom_type_setup): every Python object it holds.
int future_traverse(PyObject* self_base, visitproc visit, void* arg) {
#if PY_VERSION_HEX >= 0x03090000
    Py_VISIT(Py_TYPE(self_base));  // a heap type's instances own a reference to it
#endif
    if (!py::detail::is_holder_constructed(self_base)) return 0;
    auto& f = py::cast<LiveFuture&>(py::handle(self_base));
    for (const py::object* o : {&f.owner, &f.value, &f.raw, &f.sync, &f.aio, &f.sink}) Py_VISIT(o->ptr());
    for (const py::object& cb : f.callbacks) Py_VISIT(cb.ptr());
    return 0;
}

int future_clear(PyObject* self_base) {
    if (!py::detail::is_holder_constructed(self_base)) return 0;
    auto& f = py::cast<LiveFuture&>(py::handle(self_base));
    for (py::object* o : {&f.owner, &f.value, &f.raw, &f.sync, &f.aio, &f.sink}) *o = py::object();
    f.callbacks.clear();
    return 0;
}

void collectable_future(PyHeapTypeObject* heap_type) {
    PyTypeObject* type = &heap_type->ht_type;
    type->tp_flags |= Py_TPFLAGS_HAVE_GC;
    type->tp_traverse = future_traverse;
    type->tp_clear = future_clear;
}

// result()/exception()'s timeout in seconds: None waits; NaN and what is not a number are a
// PardValueError naming it; past ~30 years (inf too) waits as None, so t * 1e9 never overflows int64.
static double wait_seconds(const py::object& timeout, bool& forever) {
    forever = timeout.is_none();
    if (forever) return 0.0;
    double t = 0.0;
    // pybind11's converting cast would take "1" as 1.0 (float(str)); concurrent.futures takes no strings
    bool ok = !py::isinstance<py::str>(timeout) && !py::isinstance<py::bytes>(timeout);
    if (ok) {
        try {
            t = timeout.cast<double>();
        } catch (const py::cast_error&) {
            ok = false;
        }
    }
    if (!ok || std::isnan(t)) {
        const std::string shown = py::str(py::repr(timeout));
        PyErr_SetObject(py::module_::import("pard.errors").attr("PardValueError").ptr(),
                        py::str("timeout=" + shown + " must be a number of seconds or None").ptr());
        throw py::error_already_set();
    }
    if (t > 1e9) forever = true;
    return t;
}

void LiveFuture::wait(py::object timeout) {
    bool forever = false;
    const double t = wait_seconds(timeout, forever);  // checked even when done: a bad call is bad always
    if (state.load() != kPending) return;
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::nanoseconds(static_cast<std::int64_t>((t > 0 ? t : 0.0) * 1e9));
    WaitShard& w = wait_shards()[key % 64];
    while (state.load() == kPending) {
        auto now = std::chrono::steady_clock::now();
        if (!forever && now >= until) break;
        // wait in slices so that a signal (Ctrl-C) in the main thread is seen
        auto slice = now + std::chrono::milliseconds(50);
        if (!forever && until < slice) slice = until;
        waiters.fetch_add(1);
        {
            py::gil_scoped_release release;
            std::unique_lock<std::mutex> lock(w.mu);
            w.cv.wait_until(lock, slice, [this] { return state.load() != kPending; });
        }
        waiters.fetch_sub(1);
        if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    }
}

[[noreturn]] void raise_object(const py::object& exc) {
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
    throw py::error_already_set();
}

// Only the runtime resolves a request's future (concurrent.futures' Executor-side methods refuse).
[[noreturn]] void throw_resolved_by_runtime(const char* method) {
    PyErr_SetString(PyExc_RuntimeError,
                    (std::string("a RequestFuture is resolved by its Runtime: ") + method + " is not for callers").c_str());
    throw py::error_already_set();
}

py::object futures_module() {
    return py::module_::import("concurrent.futures");
}

}  // namespace
}  // namespace pard::bind
