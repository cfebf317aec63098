// Bindings for the live runtime's hot path (pard/live_pipeline.hpp): LivePipeline over Python
// payloads, its per-worker state, and LiveFuture, the request future it resolves. Thin: the rules
// live in the header; here are the conversions, the GIL (released only where a thread waits) and the
// future's waiting. The Python side is python/pard/runtime/ (workers.py runs the executor, live.py
// builds the user's exceptions lazily).
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <array>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "pard/live_pipeline.hpp"
#include "pard/stage_scheduler.hpp"
#include "register.hpp"
#include "seconds.hpp"

namespace py = pybind11;

namespace pard::bind {
namespace {

using Pipe = LivePipeline<py::object, py::object>;
using Done = Pipe::Done;

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

class LiveRuntime;

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

    [[nodiscard]] std::uint64_t request_id() const noexcept { return key >> Pipe::kSlotBits; }
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
    for (const py::object* o : {&f.owner, &f.value, &f.raw, &f.sync}) Py_VISIT(o->ptr());
    for (const py::object& cb : f.callbacks) Py_VISIT(cb.ptr());
    return 0;
}

int future_clear(PyObject* self_base) {
    if (!py::detail::is_holder_constructed(self_base)) return 0;
    auto& f = py::cast<LiveFuture&>(py::handle(self_base));
    for (py::object* o : {&f.owner, &f.value, &f.raw, &f.sync}) *o = py::object();
    f.callbacks.clear();
    return 0;
}

void collectable_future(PyHeapTypeObject* heap_type) {
    PyTypeObject* type = &heap_type->ht_type;
    type->tp_flags |= Py_TPFLAGS_HAVE_GC;
    type->tp_traverse = future_traverse;
    type->tp_clear = future_clear;
}

class LiveRuntime {
public:
    LiveRuntime(std::vector<py::object> scheds, std::vector<std::vector<int>> successors,
                std::vector<std::vector<int>> preds, std::vector<std::int64_t> max_queue,
                std::vector<double> capacity, std::vector<int> entries, std::vector<int> exits,
                std::size_t history, py::object join, py::list exit_names, py::object error_factory)
        : scheds_(std::move(scheds)), join_(std::move(join)), exit_names_(std::move(exit_names)),
          error_factory_(std::move(error_factory)) {
        std::vector<LiveStageSpec> specs;
        for (std::size_t k = 0; k < scheds_.size(); ++k) {
            LiveStageSpec s;
            s.sched = scheds_[k].cast<StageScheduler*>();
            s.successors = successors.at(k);
            s.preds = preds.at(k);
            s.max_queue = max_queue.at(k);
            s.capacity_req_s = capacity.at(k);
            specs.push_back(std::move(s));
        }
        push_hooks_.assign(scheds_.size(), py::none());
        form_hooks_.assign(scheds_.size(), py::none());
        Pipe::Hooks hooks;
        hooks.join = [this](int, std::vector<py::object>& parts, py::object& out, py::object& err) {
            py::list l;
            for (auto& p : parts) l.append(p);
            try {
                out = join_(l);
                return true;
            } catch (py::error_already_set& e) {
                err = e.value();
                return false;
            }
        };
        hooks.combine = [this](const std::vector<int>&, std::vector<py::object>& outs) -> py::object {
            py::dict d;
            for (std::size_t i = 0; i < outs.size(); ++i) d[exit_names_[i]] = outs[i];
            return std::move(d);
        };
        pipe_ = std::make_unique<Pipe>(std::move(specs), std::move(entries), std::move(exits), history, std::move(hooks));
    }

    Pipe& pipe() { return *pipe_; }

    // Resolves the futures of ended requests (GIL held, no core lock held).
    void resolve(std::vector<Done>& done) {
        for (Done& d : done) {
            if (!d.handle) continue;
            py::object fo = std::move(d.handle);
            auto& f = fo.cast<LiveFuture&>();
            if (d.kind == EndKind::kCancel) {
                f.state.store(LiveFuture::kCancelled);
            } else if (d.kind == EndKind::kOutput) {
                f.ostate = static_cast<int>(d.state);  // on time or late: outcome_state
                f.value = std::move(d.value);
                f.state.store(LiveFuture::kResult);
            } else {
                f.ostate = static_cast<int>(d.state);
                f.stage = d.stage;
                f.reason = d.reason;
                f.kind = static_cast<int>(d.kind);
                f.queued = d.queued;
                f.retry_after_s = d.retry_after_s;
                f.raw = std::move(d.value);
                f.state.store(LiveFuture::kError);
            }
            if (f.waiters.load() > 0) {
                WaitShard& w = wait_shards()[f.key % 64];
                std::lock_guard<std::mutex> lock(w.mu);
                w.cv.notify_all();
            }
            if (!f.callbacks.empty()) f.run_callbacks(fo);
        }
        done.clear();
    }

    py::object submit(py::object self, const py::object& payload, double slo_s, std::int32_t tier,
                      std::int64_t deadline_ns = Pipe::kNoDeadline) {
        auto* fp = new LiveFuture();  // owned by `fo` from the next line on (no second type lookup to reach it)
        py::object fo = py::cast(fp, py::return_value_policy::take_ownership);
        LiveFuture& f = *fp;
        f.owner = std::move(self);
        std::vector<Done> done;
        auto fault = [this](int k) {
            const py::object& h = push_hooks_[static_cast<std::size_t>(k)];
            if (!h.is_none()) h(k);
        };
        py::object failure = py::none();
        std::uint64_t key = 0;
        try {
            key = pipe_->submit(payload, to_ns(slo_s, "slo"), slo_s, tier, fo, done, fault, failure, deadline_ns);
        } catch (py::error_already_set& e) {
            // a later entry push raised: the request ended failed (its exception names the error)
            for (Done& d : done) {
                if (d.kind == EndKind::kFailure) d.value = e.value();
            }
            resolve(done);
            throw;
        }
        f.key = key;
        resolve(done);
        return fo;
    }

    py::object make_error(LiveFuture& f) {
        py::object raw = f.raw ? f.raw : py::none();
        return error_factory_(f.request_id(), f.ostate, f.stage, f.reason, f.kind, raw, f.queued, f.retry_after_s);
    }

    std::vector<py::object> scheds_;
    py::object join_;
    py::list exit_names_;
    py::object error_factory_;
    std::vector<py::object> push_hooks_, form_hooks_;
    std::unique_ptr<Pipe> pipe_;
};

py::object LiveFuture::exception_object() {
    if (state.load() != kError) return py::none();
    if (!value) value = owner.cast<LiveRuntime&>().make_error(*this);
    return value;
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

// LivePipeline.submit(payload, slo_s, tier) as a METH_FASTCALL method: Runtime.submit calls it once
// per request with the GIL held, and pybind11's generic dispatcher (argument vectors, overload
// loop, casts) cost about as much as the C++ submit itself. Same arguments, conversions and
// errors as the pybind11 form it replaces (positional or keyword; float / int conversion as
// PyFloat_AsDouble / PyLong_AsLong; C++ exceptions mapped as pybind11 maps them).
PyObject* fast_submit(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
    static const char* const names[4] = {"payload", "slo_s", "tier", "deadline_s"};
    PyObject* a[4] = {nullptr, nullptr, nullptr, nullptr};
    if (nargs > 4) {
        PyErr_Format(PyExc_TypeError, "submit() takes 3 or 4 arguments (payload, slo_s, tier[, deadline_s]), got %zd",
                     nargs);
        return nullptr;
    }
    for (Py_ssize_t i = 0; i < nargs; ++i) a[i] = args[i];
    const Py_ssize_t nkw = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t i = 0; i < nkw; ++i) {
        PyObject* name = PyTuple_GET_ITEM(kwnames, i);
        int j = 0;
        while (j < 4 && PyUnicode_CompareWithASCIIString(name, names[j]) != 0) ++j;
        if (j == 4 || a[j] != nullptr) {
            PyErr_Format(PyExc_TypeError, "submit() got an unexpected or repeated keyword argument '%U'", name);
            return nullptr;
        }
        a[j] = args[nargs + i];
    }
    for (int j = 0; j < 3; ++j) {
        if (a[j] == nullptr) {
            PyErr_Format(PyExc_TypeError, "submit() missing argument '%s'", names[j]);
            return nullptr;
        }
    }
    const double slo_s = PyFloat_AsDouble(a[1]);
    if (slo_s == -1.0 && PyErr_Occurred()) return nullptr;
    const long tier = PyLong_AsLong(a[2]);
    if (tier == -1 && PyErr_Occurred()) return nullptr;
    if (tier < INT32_MIN || tier > INT32_MAX) {
        PyErr_Format(PyExc_OverflowError, "submit(): tier=%ld does not fit an int32", tier);
        return nullptr;
    }
    try {
        std::int64_t deadline_ns = Pipe::kNoDeadline;
        if (a[3] != nullptr && a[3] != Py_None) {
            const double deadline_s = PyFloat_AsDouble(a[3]);
            if (deadline_s == -1.0 && PyErr_Occurred()) return nullptr;
            deadline_ns = to_ns(deadline_s, "deadline");
        }
        py::object me = py::reinterpret_borrow<py::object>(self);
        auto& rt = me.cast<LiveRuntime&>();
        return rt.submit(me, py::reinterpret_borrow<py::object>(a[0]), slo_s, static_cast<std::int32_t>(tier),
                         deadline_ns).release().ptr();
    } catch (py::error_already_set& e) {
        e.restore();
    } catch (const std::bad_alloc&) {
        PyErr_SetString(PyExc_MemoryError, "std::bad_alloc");
    } catch (const std::invalid_argument& e) {
        PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const std::length_error& e) {
        PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const std::exception& e) {
        PyErr_SetString(PyExc_RuntimeError, e.what());
    } catch (...) {
        PyErr_SetString(PyExc_RuntimeError, "Caught an unknown exception!");
    }
    return nullptr;
}

PyMethodDef fast_submit_def = {
    "submit", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fast_submit)), METH_FASTCALL | METH_KEYWORDS,
    "submit(payload, slo_s, tier, deadline_s=None) -> LiveFuture: one request into every entry stage (C++ "
    "pipeline); its deadline is send + slo_s, or deadline_s (absolute, the runtime clock) when earlier."};

}  // namespace

void register_live(py::module_& m) {
    // Visible to Python's cycle collector: a done-callback or an awaiting coroutine that catches the
    // future's exception makes a cycle (exception -> traceback -> frame -> future -> exception), and a
    // type without tp_traverse keeps every such cycle for ever (a new user's service leaked ~1 KB per
    // dropped request under overload: 80 000 exceptions alive after 80 000 drops).
    py::class_<LiveFuture>(m, "LiveFuture", "A request's future (pard.RequestFuture): resolved in C++ by the live pipeline.",
                           py::custom_type_setup(collectable_future))
        .def_property_readonly("request_id", &LiveFuture::request_id)
        .def_property_readonly("outcome_state", [](const LiveFuture& f) {
            const int s = f.state.load();
            return s == LiveFuture::kPending ? 0 : s == LiveFuture::kCancelled ? static_cast<int>(Outcome::kDropped) : f.ostate;
        }, "The request's outcome (an index into pard.outcomes.STATES) once done; 0 (pending) before.")
        .def("done", [](const LiveFuture& f) { return f.state.load() != LiveFuture::kPending; })
        .def("cancelled", [](const LiveFuture& f) { return f.state.load() == LiveFuture::kCancelled; })
        .def("running", [](const LiveFuture&) { return false; })
        .def("result", [](py::object self, py::object timeout) -> py::object {
                 auto& f = self.cast<LiveFuture&>();
                 f.wait(timeout);
                 switch (f.state.load()) {
                     case LiveFuture::kResult: return f.value;
                     case LiveFuture::kError: raise_object(f.exception_object());
                     case LiveFuture::kCancelled: raise_object(futures_module().attr("CancelledError")());
                     default: raise_object(py::module_::import("builtins").attr("TimeoutError")());
                 }
             },
             py::arg("timeout") = py::none(),
             "The output; raises pard.Dropped / Rejected / ExecutorError, CancelledError, or TimeoutError "
             "after timeout seconds (None: wait). Waits with the GIL released.")
        .def("exception", [](py::object self, py::object timeout) -> py::object {
                 auto& f = self.cast<LiveFuture&>();
                 f.wait(timeout);
                 switch (f.state.load()) {
                     case LiveFuture::kResult: return py::none();
                     case LiveFuture::kError: return f.exception_object();
                     case LiveFuture::kCancelled: raise_object(futures_module().attr("CancelledError")());
                     default: raise_object(py::module_::import("builtins").attr("TimeoutError")());
                 }
             },
             py::arg("timeout") = py::none())
        .def("cancel", [](py::object self) {
                 auto& f = self.cast<LiveFuture&>();
                 const int s = f.state.load();
                 if (s != LiveFuture::kPending) return s == LiveFuture::kCancelled;
                 auto& rt = f.owner.cast<LiveRuntime&>();
                 std::vector<Done> done;
                 const bool ok = rt.pipe().cancel(f.key, done);
                 rt.resolve(done);
                 return ok;
             },
             "Cancel the request unless it has ended or its batch has started (then False).")
        .def("add_done_callback", [](py::object self, py::object fn) {
                 auto& f = self.cast<LiveFuture&>();
                 if (f.state.load() != LiveFuture::kPending) {
                     LiveFuture::call_logged(fn, self);
                     return;
                 }
                 f.callbacks.push_back(std::move(fn));
             },
             py::arg("fn"), "Call fn(future) when the request ends (at once if it has); a raising fn is logged.")
        .def_property("_sync", [](const LiveFuture& f) { return f.sync ? f.sync : py::none(); },
                      [](LiveFuture& f, py::object v) { f.sync = std::move(v); })
        .def("set_result", [](const LiveFuture&, const py::object&) { throw_resolved_by_runtime("set_result"); })
        .def("set_exception", [](const LiveFuture&, const py::object&) { throw_resolved_by_runtime("set_exception"); })
        .def("set_running_or_notify_cancel", [](const LiveFuture&) { throw_resolved_by_runtime("set_running_or_notify_cancel"); })
        .def("__repr__", [](const LiveFuture& f) {
            static const char* names[] = {"pending", "finished", "failed", "cancelled"};
            return "<RequestFuture request_id=" + std::to_string(f.request_id()) + " " + names[f.state.load()] + ">";
        });

    py::class_<Pipe::Worker>(m, "LiveWorker", "One worker thread's batches (the running one, the one collected next).")
        .def_property_readonly("stage", [](const Pipe::Worker& w) { return w.stage; })
        .def_property_readonly("size", [](const Pipe::Worker& w) { return w.running.size(); })
        .def_property_readonly("next_size", [](const Pipe::Worker& w) { return w.has_next ? w.next.size() : 0; })
        .def_property_readonly("max_deadline_s", [](const Pipe::Worker& w) { return to_s(w.max_deadline_ns); })
        .def_property_readonly("delays", [](const Pipe::Worker& w) { return w.delays; });

    py::class_<LiveRuntime> live_cls(m, "LivePipeline", "The live runtime's per-request hot path (pard/live_pipeline.hpp).");
    live_cls
        .def(py::init<std::vector<py::object>, std::vector<std::vector<int>>, std::vector<std::vector<int>>,
                      std::vector<std::int64_t>, std::vector<double>, std::vector<int>, std::vector<int>, std::size_t,
                      py::object, py::list, py::object>(),
             py::kw_only(), py::arg("schedulers"), py::arg("successors"), py::arg("preds"), py::arg("max_queue"),
             py::arg("capacity_req_s"), py::arg("entries"), py::arg("exits"), py::arg("history"), py::arg("join"),
             py::arg("exit_names"), py::arg("error_factory"))
        .def("set_origin", [](LiveRuntime& r, double perf_counter_s) {
            r.pipe().set_origin_ns(static_cast<std::int64_t>(std::llround(perf_counter_s * 1e9)));
        })
        .def("now", [](LiveRuntime& r) { return to_s(r.pipe().now_ns()); })
        .def("worker", [](LiveRuntime&, int k) {
            auto w = std::make_unique<Pipe::Worker>();
            w->stage = k;
            return w;
        })
        .def("next_batch", [](LiveRuntime& r, Pipe::Worker& w) -> py::object {
                 std::vector<py::object> payloads;
                 std::vector<Done> done;
                 auto hook = [&r](int k) {
                     const py::object& h = r.form_hooks_[static_cast<std::size_t>(k)];
                     if (!h.is_none()) h(k);
                 };
                 while (true) {
                     bool go = false;
                     {
                         py::gil_scoped_release release;
                         go = r.pipe().next_batch_wait(w);
                     }
                     if (!go) return py::none();
                     try {
                         r.pipe().next_batch_take(w, payloads, done, hook);
                     } catch (...) {
                         r.resolve(done);
                         throw;
                     }
                     r.resolve(done);
                     if (!payloads.empty()) break;
                 }
                 py::list out(payloads.size());
                 for (std::size_t i = 0; i < payloads.size(); ++i) out[i] = std::move(payloads[i]);
                 return std::move(out);
             },
             "Wait (GIL released) for the stage's next batch; its payloads (a list), or None to stop.")
        .def("complete", [](LiveRuntime& r, Pipe::Worker& w, py::object outs, py::object err, double start_s, double end_s) {
                 std::vector<py::object> o;
                 const bool failed = !err.is_none();
                 if (!failed) {
                     for (auto item : outs) o.push_back(py::reinterpret_borrow<py::object>(item));
                 }
                 std::vector<Done> done;
                 r.pipe().complete(w, o, failed, err, to_ns(start_s, "start_s"), to_ns(end_s, "end_s"), done);
                 r.resolve(done);
             },
             py::arg("worker"), py::arg("outputs"), py::arg("error"), py::arg("start_s"), py::arg("end_s"),
             "The executor returned `outputs` for the worker's running batch (or raised `error`): route every "
             "request on and resolve the futures of those that ended.")
        .def("purge", [](LiveRuntime& r, int k, double now_s, double t_e_s) {
                 std::vector<Done> done;
                 r.pipe().purge(k, to_ns(now_s, "now_s"), to_ns(t_e_s, "expected_start_s"), done);
                 const std::size_t n = done.size();
                 r.resolve(done);
                 return n;
             },
             py::arg("stage"), py::arg("now_s"), py::arg("expected_start_s"),
             "Stage k's StageScheduler::purge for a batch expected at expected_start_s (no batch formed): "
             "end what it dropped and resolve their futures; returns how many (Triton #7512).")
        .def("cancel_all", [](LiveRuntime& r) {
            std::vector<Done> done;
            r.pipe().cancel_all(done);
            r.resolve(done);
        })
        .def("stop", [](LiveRuntime& r) { r.pipe().stop(); })
        .def("open_admission", [](LiveRuntime& r) { r.pipe().open_admission(); })
        .def("close_admission", [](LiveRuntime& r) { r.pipe().close_admission(); })
        .def("wait_idle", [](LiveRuntime& r, py::object until_s) {
                 const std::int64_t until = until_s.is_none() ? -1 : to_ns(until_s.cast<double>(), "until_s");
                 py::gil_scoped_release release;
                 return r.pipe().wait_idle(until);
             },
             py::arg("until_s") = py::none(), "Wait (GIL released) until nothing is in flight or until_s (runtime clock).")
        .def("mark_dead", [](LiveRuntime& r, int k, py::object info) { r.pipe().mark_dead(k, info); })
        .def("held_at", [](LiveRuntime& r, int k, Pipe::Worker* w) { return r.pipe().held_at(k, w); },
             py::arg("stage"), py::arg("worker") = nullptr)
        .def("fail_dead", [](LiveRuntime& r, std::uint64_t key, int k, py::object info) {
            std::vector<Done> done;
            r.pipe().fail(key, k, EndKind::kDead, info, done);
            r.resolve(done);
        })
        .def("counts", [](LiveRuntime& r) { return r.pipe().counts(); },
             "(submitted, pending, on_time, late, dropped, rejected, failed) at one moment.")
        .def("drop_counts", [](LiveRuntime& r) { return r.pipe().drop_counts(); })
        .def("in_flight", [](LiveRuntime& r) { return r.pipe().in_flight(); })
        .def("outcomes", [](LiveRuntime& r) {
            auto o = r.pipe().outcomes();
            py::dict d;
            d["send_s"] = py::array_t<double>(static_cast<py::ssize_t>(o.send_s.size()), o.send_s.data());
            d["slo_s"] = py::array_t<double>(static_cast<py::ssize_t>(o.slo_s.size()), o.slo_s.data());
            d["tier"] = py::array_t<std::int32_t>(static_cast<py::ssize_t>(o.tier.size()), o.tier.data());
            d["state"] = py::array_t<std::int8_t>(static_cast<py::ssize_t>(o.state.size()), o.state.data());
            d["finish_s"] = py::array_t<double>(static_cast<py::ssize_t>(o.finish_s.size()), o.finish_s.data());
            d["drop_stage"] = py::array_t<std::int32_t>(static_cast<py::ssize_t>(o.drop_stage.size()), o.drop_stage.data());
            d["reason"] = py::array_t<std::int32_t>(static_cast<py::ssize_t>(o.reason.size()), o.reason.data());
            d["compute_s"] = py::array_t<double>(static_cast<py::ssize_t>(o.compute_s.size()), o.compute_s.data());
            d["request_id"] = py::array_t<std::int64_t>(static_cast<py::ssize_t>(o.rid.size()), o.rid.data());
            return d;
        })
        .def("queued", [](LiveRuntime& r, int k) { return r.pipe().queued_live(k); })
        .def("retry_after_s", [](LiveRuntime& r, int k) { return r.pipe().retry_after_s(k); })
        .def("door_finish_s", [](LiveRuntime& r, std::int32_t tier, std::size_t in_front) {
                 return to_s(r.pipe().door_finish_ns(tier, in_front));
             },
             py::arg("tier") = 0, py::arg("in_front") = 0,
             "The door test (pard/door.hpp): the estimated time (s, the runtime clock) at which a request of "
             "service tier `tier` arriving now would leave the pipeline, the latest over the entry stages, with "
             "`in_front` requests admitted ahead of it that have not reached the entry queues yet.")
        .def("take_stats", [](LiveRuntime& r, int k) {
            auto s = r.pipe().take_stats(k);
            py::dict d;
            auto f64 = [](const std::vector<double>& v) { return py::array_t<double>(static_cast<py::ssize_t>(v.size()), v.data()); };
            d["arrival_s"] = f64(s.arrival_s);
            d["qdelay_t_s"] = f64(s.qdelay_t_s);
            d["qdelay_s"] = f64(s.qdelay_s);
            d["batch_start_s"] = f64(s.batch_start_s);
            d["batch_duration_s"] = f64(s.batch_duration_s);
            d["batch_size"] = py::array_t<std::int64_t>(static_cast<py::ssize_t>(s.batch_size.size()), s.batch_size.data());
            d["batch_wait_s"] = f64(s.batch_wait_s);
            return d;
        })
        .def("log_batch", [](LiveRuntime& r, int k, double start_s, double duration_s, std::int64_t size, double wait_s) {
            r.pipe().log_batch(k, start_s, duration_s, size, wait_s);
        })
        .def("recent_batches", [](LiveRuntime& r, int k) { return r.pipe().recent_batches(k); })
        .def("recent_delays", [](LiveRuntime& r, int k) {
            auto v = r.pipe().recent_delays(k);
            return py::array_t<double>(static_cast<py::ssize_t>(v.size()), v.data());
        })
        .def("scheduler_s", [](LiveRuntime& r) { return to_s(r.pipe().scheduler_ns()); })
        .def("outcome_rows", [](LiveRuntime& r) { return r.pipe().outcome_rows(); })
        .def("set_push_hook", [](LiveRuntime& r, int k, py::object fn) { r.push_hooks_.at(static_cast<std::size_t>(k)) = std::move(fn); },
             "Test hook: fn(stage) runs before every push into stage's queue at submit (it may raise).")
        .def("set_form_hook", [](LiveRuntime& r, int k, py::object fn) { r.form_hooks_.at(static_cast<std::size_t>(k)) = std::move(fn); },
             "Test hook: fn(stage) runs before every batch formation at stage (it may raise or block).");
    // submit: the fast-call method above, bound as a method descriptor of the class
    py::object descr = py::reinterpret_steal<py::object>(
        PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(live_cls.ptr()), &fast_submit_def));
    if (!descr || PyObject_SetAttrString(live_cls.ptr(), "submit", descr.ptr()) != 0) throw py::error_already_set();
}

}  // namespace pard::bind
