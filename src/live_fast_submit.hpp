// LivePipeline.submit as a METH_FASTCALL method (see fast_submit); register_live.cpp binds it.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <new>
#include <stdexcept>

#include "live_runtime.hpp"
#include "seconds.hpp"

namespace pard::bind {
// Private to register_live.cpp, its one includer: internal linkage, as in a single source file,
// lets the compiler inline the hot path's single-call functions (LivePipeline::submit into
// fast_submit).
namespace {

// LivePipeline.submit(payload, slo_s, tier) as a METH_FASTCALL method: Runtime.submit calls it once
// per request with the GIL held, and pybind11's generic dispatcher (argument vectors, overload
// loop, casts) cost about as much as the C++ submit itself. Same arguments, conversions and
// errors as the pybind11 form it replaces (positional or keyword; float / int conversion as
// PyFloat_AsDouble / PyLong_AsLong; C++ exceptions mapped as pybind11 maps them).
PyObject* fast_submit(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
    constexpr int kArgs = 7;
    static const char* const names[kArgs] = {"payload", "slo_s", "tier", "deadline_s", "in_tokens", "max_tokens", "max_new"};
    PyObject* a[kArgs] = {nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
    if (nargs > kArgs) {
        PyErr_Format(PyExc_TypeError,
                     "submit() takes 3 to 7 arguments (payload, slo_s, tier[, deadline_s, in_tokens, max_tokens, max_new]), "
                     "got %zd", nargs);
        return nullptr;
    }
    for (Py_ssize_t i = 0; i < nargs; ++i) a[i] = args[i];
    const Py_ssize_t nkw = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t i = 0; i < nkw; ++i) {
        PyObject* name = PyTuple_GET_ITEM(kwnames, i);
        int j = 0;
        while (j < kArgs && PyUnicode_CompareWithASCIIString(name, names[j]) != 0) ++j;
        if (j == kArgs || a[j] != nullptr) {
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
        LiveTokens tokens;  // an LLM stage's request tokens (pard/live/types.hpp); absent: 0
        std::int32_t* const fields[3] = {&tokens.in, &tokens.max_tokens, &tokens.max_new};
        for (int j = 4; j < kArgs; ++j) {
            if (a[j] == nullptr || a[j] == Py_None) continue;
            const long v = PyLong_AsLong(a[j]);
            if (v == -1 && PyErr_Occurred()) return nullptr;
            if (v < 0 || v > INT32_MAX) {
                PyErr_Format(PyExc_ValueError, "submit(): %s=%ld must be in [0, 2^31)", names[j], v);
                return nullptr;
            }
            *fields[j - 4] = static_cast<std::int32_t>(v);
        }
        py::object me = py::reinterpret_borrow<py::object>(self);
        auto& rt = me.cast<LiveRuntime&>();
        return rt.submit(me, py::reinterpret_borrow<py::object>(a[0]), slo_s, static_cast<std::int32_t>(tier),
                         deadline_ns, tokens).release().ptr();
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
    "submit(payload, slo_s, tier, deadline_s=None, in_tokens=0, max_tokens=0, max_new=0) -> LiveFuture: one "
    "request into every entry stage (C++ pipeline); its deadline is send + slo_s, or deadline_s (absolute, the "
    "runtime clock) when earlier; the tokens are for the LLM stages (0: unknown / none / the stage's cap)."};

}  // namespace
}  // namespace pard::bind
