// LoopSink: how the futures of ended requests reach the asyncio event loop awaiting them, in bulk.
//
// One sink per event loop (loop_sinks(), below). `watch` gives a request's LiveFuture an asyncio
// future of that loop and attaches the sink to it. When the runtime ends requests
// (LiveRuntime::resolve, any thread, GIL held) their LiveFutures go into the sink's WakeList
// (live_wake_list.hpp) in C++; after the whole batch is in, the loop's call_soon_threadsafe is
// called once, with a SinkWake, if a push armed the list. On the loop, the SinkWake drains the
// list in one call and settles each asyncio future (set_result / set_exception / cancel). So a
// batch of requests that end together costs one loop wake-up, and the thread that ends them runs
// no Python per request.
//
// Lifetimes. The sink holds its loop by weak reference: it never keeps a loop alive. A wake-up
// that cannot be delivered (the loop is closed or gone) or that the loop discards unrun (close()
// clears its ready queue) drops what waits: nobody awaits those futures any more. The sink, its
// SinkWake and LiveFuture are visible to the cycle collector (a waiting LiveFuture -> its asyncio
// future -> the awaiting task -> its frame -> the LiveFuture is a cycle).
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <exception>
#include <new>
#include <vector>

#include "live_future.hpp"
#include "live_wake_list.hpp"

namespace pard::bind {
// Private to register_live.cpp, its one includer (see live_future.hpp).
namespace {

// tp_traverse / tp_clear / GC flag for a bound type T with `int traverse(visitproc, void*)` and
// `void clear()`.
template <class T>
int traverse_of(PyObject* self, visitproc visit, void* arg) {
#if PY_VERSION_HEX >= 0x03090000
    Py_VISIT(Py_TYPE(self));  // a heap type's instances own a reference to it
#endif
    if (!py::detail::is_holder_constructed(self)) return 0;
    return py::cast<T&>(py::handle(self)).traverse(visit, arg);
}

template <class T>
int clear_of(PyObject* self) {
    if (py::detail::is_holder_constructed(self)) py::cast<T&>(py::handle(self)).clear();
    return 0;
}

template <class T>
void collectable(PyHeapTypeObject* heap_type) {
    PyTypeObject* type = &heap_type->ht_type;
    type->tp_flags |= Py_TPFLAGS_HAVE_GC;
    type->tp_traverse = traverse_of<T>;
    type->tp_clear = clear_of<T>;
}

// The referent of a weak reference (a new reference), or None once it is gone.
py::object weak_target(const py::object& ref) {
#if PY_VERSION_HEX >= 0x030D0000
    PyObject* obj = nullptr;
    if (PyWeakref_GetRef(ref.ptr(), &obj) < 0) throw py::error_already_set();
    return obj == nullptr ? py::none() : py::reinterpret_steal<py::object>(obj);
#else
    return py::reinterpret_borrow<py::object>(PyWeakref_GetObject(ref.ptr()));
#endif
}

// The method names the sink calls, interned once (the module is never unloaded: never freed).
struct MethodNames {
    PyObject* done;
    PyObject* set_result;
    PyObject* set_exception;
    PyObject* cancel;
    PyObject* create_future;
    PyObject* call_soon_threadsafe;
};
const MethodNames& method_names() {
    auto intern = [](const char* s) {
        PyObject* o = PyUnicode_InternFromString(s);
        if (o == nullptr) throw py::error_already_set();
        return o;
    };
    static const MethodNames names{intern("done"), intern("set_result"), intern("set_exception"), intern("cancel"),
                                   intern("create_future"), intern("call_soon_threadsafe")};
    return names;
}

// obj.name(arg?) through the vectorcall protocol: the drain's per-request calls skip building bound
// methods and argument tuples.
py::object call_method(const py::handle& obj, PyObject* name, PyObject* arg = nullptr) {
    PyObject* args[2] = {obj.ptr(), arg};
    const std::size_t n = arg == nullptr ? 1 : 2;
    PyObject* out = PyObject_VectorcallMethod(name, args, n | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
    if (out == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(out);
}

struct LoopSink {
    py::object loop_ref;           // weakref.ref to the event loop
    WakeList<py::object> ready;    // LiveFuture objects that ended, for the loop's next drain

    // An asyncio future of the loop for LiveFuture `fut`, settled as the request ends. On the loop.
    static py::object watch(const py::object& self, const py::object& fut) {
        auto& sink = self.cast<LoopSink&>();
        auto& f = fut.cast<LiveFuture&>();
        if (f.aio) already_watched();
        py::object loop = weak_target(sink.loop_ref);
        if (loop.is_none()) {
            PyErr_SetString(PyExc_RuntimeError, "this event loop is gone");
            throw py::error_already_set();
        }
        py::object aio = call_method(loop, method_names().create_future);  // may run Python: check f after it
        if (f.aio) already_watched();
        if (f.state.load() != LiveFuture::kPending) {
            settle(f, aio);
            return aio;
        }
        // no Python between the check above and these stores: resolve() sees both or neither
        f.aio = aio;
        f.sink = self;
        return aio;
    }

    // resolve(): the request of LiveFuture `fut` ended, and sink `self` waits for it. Any thread, GIL
    // held, no Python run. True when the caller must wake the loop (wake(self)) once it has handed
    // off the rest of its batch: waking runs Python, during which the loop could drain half a batch.
    [[nodiscard]] static bool hand_off(const py::object& self, py::object fut) {
        return self.cast<LoopSink&>().ready.push(std::move(fut));
    }

    // Asks the loop to drain sink `self` soon (call_soon_threadsafe); drops what waits if it cannot.
    static void wake(const py::object& self) {
        auto& sink = self.cast<LoopSink&>();
        try {
            py::object loop = weak_target(sink.loop_ref);
            if (loop.is_none()) {
                sink.lose();
                return;
            }
            call_method(loop, method_names().call_soon_threadsafe, make_wake(self).ptr());
        } catch (py::error_already_set& e) {
            // RuntimeError: the loop is closed. Either way no drain will come.
            if (!e.matches(PyExc_RuntimeError)) e.discard_as_unraisable("pard: waking an event loop");
            sink.lose();
        }
    }

    // On the loop: settle the asyncio future of every LiveFuture in the list.
    void drain() {
        std::vector<py::object> items;
        ready.take(items);
        for (py::object& fo : items) {
            auto& f = fo.cast<LiveFuture&>();
            py::object aio = std::move(f.aio);
            f.sink = py::object();
            if (!aio) continue;
            try {
                settle(f, aio);
            } catch (py::error_already_set& e) {  // building the request's exception failed: await raises that
                try {
                    call_method(aio, method_names().set_exception, e.value().ptr());
                } catch (py::error_already_set& again) {
                    again.discard_as_unraisable("pard: settling an asyncio future");
                }
            }
        }
    }

    // The loop will not drain (closed, gone): drop what waits and the futures' hold on the loop.
    void lose() {
        std::vector<py::object> items;
        ready.lost(items);
        for (py::object& fo : items) {
            auto& f = fo.cast<LiveFuture&>();
            f.aio = py::object();
            f.sink = py::object();
        }
    }

    // The asyncio future takes the request's end: its output, its exception, or cancelled. Skipped
    // when the awaiting side already cancelled it.
    static void settle(LiveFuture& f, const py::object& aio) {
        if (call_method(aio, method_names().done).ptr() == Py_True) return;
        switch (f.state.load()) {
            case LiveFuture::kResult: call_method(aio, method_names().set_result, f.value.ptr()); break;
            case LiveFuture::kError: call_method(aio, method_names().set_exception, f.exception_object().ptr()); break;
            default: call_method(aio, method_names().cancel); break;
        }
    }

    [[noreturn]] static void already_watched() {
        PyErr_SetString(PyExc_RuntimeError, "this RequestFuture is already awaited on an event loop");
        throw py::error_already_set();
    }

    static py::object make_wake(const py::object& self);

    int traverse(visitproc visit, void* arg) {
        Py_VISIT(loop_ref.ptr());
        int out = 0;
        ready.for_each([&](const py::object& o) {
            if (out == 0 && o) out = visit(o.ptr(), arg);
        });
        return out;
    }
    void clear() { lose(); }
};

// What call_soon_threadsafe runs: the sink's drain. Discarded unrun (the loop closed with it
// queued), it drops what the sink holds, since no drain will come.
struct SinkWake {
    py::object sink;
    SinkWake() = default;
    explicit SinkWake(py::object s) : sink(std::move(s)) {}
    SinkWake(const SinkWake&) = delete;
    SinkWake& operator=(const SinkWake&) = delete;
    ~SinkWake() {
        if (sink) sink.cast<LoopSink&>().lose();
    }
    void operator()() {
        py::object s = std::move(sink);  // ran: the destructor has nothing left to drop
        if (s) s.cast<LoopSink&>().drain();
    }
    int traverse(visitproc visit, void* arg) {
        Py_VISIT(sink.ptr());
        return 0;
    }
    void clear() { sink = py::object(); }
};

py::object LoopSink::make_wake(const py::object& self) {
    return py::cast(new SinkWake(self), py::return_value_policy::take_ownership);
}

// The sinks, one per live event loop: id(loop) -> LoopSink. An entry leaves when its loop is
// collected (a weakref callback), before the id can be reused. Never freed, as the module is not:
// a static py::object would be destroyed after the interpreter.
py::dict& loop_sinks() {
    static auto* sinks = new py::dict();
    return *sinks;
}

// The sink of `loop`, made on first use.
py::object loop_sink(const py::object& loop) {
    py::dict& sinks = loop_sinks();
    py::object key = py::reinterpret_steal<py::object>(PyLong_FromVoidPtr(loop.ptr()));
    if (!key) throw py::error_already_set();
    PyObject* found = PyDict_GetItemWithError(sinks.ptr(), key.ptr());  // borrowed
    if (found != nullptr) return py::reinterpret_borrow<py::object>(found);
    if (PyErr_Occurred()) throw py::error_already_set();
    py::cpp_function forget([key](const py::handle&) {
        if (PyDict_DelItem(loop_sinks().ptr(), key.ptr()) != 0) PyErr_Clear();  // absent: nothing to forget
    });
    py::object ref = py::reinterpret_steal<py::object>(PyWeakref_NewRef(loop.ptr(), forget.ptr()));
    if (!ref) throw py::error_already_set();
    auto* sink = new LoopSink();
    py::object out = py::cast(sink, py::return_value_policy::take_ownership);
    sink->loop_ref = std::move(ref);
    sinks[key] = out;
    return out;
}

// asyncio.get_running_loop(): the loop, or RuntimeError.
py::object running_loop() {
    static PyObject* get = py::object(py::module_::import("asyncio").attr("get_running_loop")).release().ptr();
    PyObject* loop = PyObject_CallNoArgs(get);
    if (loop == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(loop);
}

// watch(future) as a METH_FASTCALL function: `await rt.infer` calls it once per request, and the
// sink lookup and pybind11's dispatch cost about as much as LoopSink::watch itself.
PyObject* fast_watch(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
    if (nargs != 1) {
        PyErr_Format(PyExc_TypeError, "watch() takes 1 argument (a RequestFuture), got %zd", nargs);
        return nullptr;
    }
    try {
        py::object fut = py::reinterpret_borrow<py::object>(args[0]);
        if (!py::isinstance<LiveFuture>(fut)) {
            PyErr_Format(PyExc_TypeError, "watch(): expected a RequestFuture, got %R", args[0]);
            return nullptr;
        }
        return LoopSink::watch(loop_sink(running_loop()), fut).release().ptr();
    } catch (py::error_already_set& e) {
        e.restore();
    } catch (const std::bad_alloc&) {
        PyErr_SetString(PyExc_MemoryError, "std::bad_alloc");
    } catch (const std::exception& e) {
        PyErr_SetString(PyExc_RuntimeError, e.what());
    }
    return nullptr;
}

PyMethodDef fast_watch_def = {
    "watch", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fast_watch)), METH_FASTCALL,
    "watch(future) -> asyncio.Future: a future of the running event loop, settled on the loop (in bulk, one "
    "wake-up per drain) as the request of `future` ends; cancelling it does not cancel the request. "
    "RuntimeError without a running loop or when `future` is already watched."};

}  // namespace
}  // namespace pard::bind
