// pard._core.DEPQ: the min-max heap of cpp/include/pard/depq.hpp keyed by (float64 deadline,
// uint64 id), with NumPy batch entry points. One internal mutex makes the object safe to share
// between Python threads: O(1) calls keep the GIL; batch calls release it and hold only the mutex
// (never the mutex while waiting for the GIL, so the two cannot deadlock).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "pard/depq.hpp"
#include "register.hpp"

namespace py = pybind11;

namespace pard::bind {
namespace {

struct Key {
    double deadline;
    std::uint64_t id;
};
struct KeyLess {
    bool operator()(const Key& a, const Key& b) const noexcept {
        return a.deadline < b.deadline || (a.deadline == b.deadline && a.id < b.id);
    }
};

std::string shape_of(const py::array& a) {
    std::string s = "(";
    for (py::ssize_t i = 0; i < a.ndim(); ++i) {
        if (i != 0) s += ", ";
        s += std::to_string(a.shape(i));
    }
    if (a.ndim() == 1) s += ",";
    return s + ")";
}

// The argument as a 1-D array of exactly dtype T, or TypeError / ValueError naming it.
template <class T>
py::array_t<T> require_1d(const py::handle& obj, const char* fn, const char* arg, const char* want) {
    if (!py::isinstance<py::array>(obj)) {
        throw py::type_error(std::string(fn) + ": '" + arg + "' must be a numpy.ndarray of " + want +
                             ", got " + std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
    }
    auto a = py::reinterpret_borrow<py::array>(obj);
    if (!a.dtype().equal(py::dtype::of<T>())) {
        throw py::type_error(std::string(fn) + ": '" + arg + "' must be " + want + ", got " +
                             std::string(py::str(a.dtype())));
    }
    if (a.ndim() != 1) {
        throw py::value_error(std::string(fn) + ": '" + arg + "' must be 1-D, got shape " + shape_of(a));
    }
    return py::reinterpret_borrow<py::array_t<T>>(obj);
}

double require_deadline(double d, const char* fn) {
    if (std::isnan(d)) throw py::value_error(std::string(fn) + ": 'deadline' must not be NaN");
    return d;
}

py::tuple as_tuple(const Key& k) { return py::make_tuple(k.deadline, k.id); }

// Copies popped keys into two fresh arrays (GIL held).
py::tuple as_arrays(const std::vector<Key>& keys) {
    const auto n = static_cast<py::ssize_t>(keys.size());
    py::array_t<double> deadlines(n);
    py::array_t<std::uint64_t> ids(n);
    double* d = deadlines.mutable_data();
    std::uint64_t* i = ids.mutable_data();
    for (std::size_t k = 0; k < keys.size(); ++k) {
        d[k] = keys[k].deadline;
        i[k] = keys[k].id;
    }
    return py::make_tuple(std::move(deadlines), std::move(ids));
}

class Depq {
public:
    void push(double deadline, std::uint64_t id) {
        require_deadline(deadline, "push");
        std::lock_guard<std::mutex> lock(mu_);
        heap_.push(Key{deadline, id});
    }

    py::tuple pop_min() { return as_tuple(pop_end(true, "pop_min")); }
    py::tuple pop_max() { return as_tuple(pop_end(false, "pop_max")); }

    py::tuple min() {
        std::lock_guard<std::mutex> lock(mu_);
        if (heap_.empty()) throw py::index_error("min from an empty DEPQ");
        return as_tuple(heap_.min());
    }
    py::tuple max() {
        std::lock_guard<std::mutex> lock(mu_);
        if (heap_.empty()) throw py::index_error("max from an empty DEPQ");
        return as_tuple(heap_.max());
    }

    void push_many(const py::handle& deadlines_obj, const py::handle& ids_obj) {
        auto deadlines = require_1d<double>(deadlines_obj, "push_many", "deadlines", "float64");
        auto ids = require_1d<std::uint64_t>(ids_obj, "push_many", "ids", "uint64");
        if (deadlines.shape(0) != ids.shape(0)) {
            throw py::value_error("push_many: 'deadlines' and 'ids' must have the same length, got " +
                                  std::to_string(deadlines.shape(0)) + " and " +
                                  std::to_string(ids.shape(0)));
        }
        auto d = deadlines.unchecked<1>();
        auto i = ids.unchecked<1>();
        const py::ssize_t n = d.shape(0);
        py::ssize_t nan_at = -1;
        {
            py::gil_scoped_release release;
            for (py::ssize_t k = 0; k < n; ++k) {
                if (std::isnan(d(k))) {
                    nan_at = k;
                    break;
                }
            }
            if (nan_at < 0) {
                std::lock_guard<std::mutex> lock(mu_);
                heap_.reserve(heap_.size() + static_cast<std::size_t>(n));
                for (py::ssize_t k = 0; k < n; ++k) heap_.push(Key{d(k), i(k)});
            }
        }
        if (nan_at >= 0) {
            throw py::value_error("push_many: 'deadlines' must not contain NaN, found at index " +
                                  std::to_string(nan_at) + " (nothing was pushed)");
        }
    }

    py::tuple pop_many(py::ssize_t n, bool low, const char* fn) {
        if (n < 0) throw py::value_error(std::string(fn) + ": 'n' must be >= 0, got " + std::to_string(n));
        std::vector<Key> out;
        {
            py::gil_scoped_release release;
            std::lock_guard<std::mutex> lock(mu_);
            const std::size_t k = std::min(static_cast<std::size_t>(n), heap_.size());
            out.reserve(k);
            for (std::size_t j = 0; j < k; ++j) out.push_back(low ? heap_.pop_min() : heap_.pop_max());
        }
        return as_arrays(out);
    }

    py::tuple drain_min_while_below(double threshold) {
        if (std::isnan(threshold)) throw py::value_error("drain_min_while_below: 'threshold' must not be NaN");
        std::vector<Key> out;
        {
            py::gil_scoped_release release;
            std::lock_guard<std::mutex> lock(mu_);
            heap_.drain_min_while([threshold](const Key& k) { return k.deadline < threshold; },
                                  [&out](Key&& k) { out.push_back(k); });
        }
        return as_arrays(out);
    }

    void clear() {
        std::lock_guard<std::mutex> lock(mu_);
        heap_.clear();
    }
    std::size_t size() {
        std::lock_guard<std::mutex> lock(mu_);
        return heap_.size();
    }

private:
    Key pop_end(bool low, const char* fn) {
        std::lock_guard<std::mutex> lock(mu_);
        if (heap_.empty()) throw py::index_error(std::string(fn) + " from an empty DEPQ");
        return low ? heap_.pop_min() : heap_.pop_max();
    }

    std::mutex mu_;
    MinMaxHeap<Key, KeyLess> heap_;
};

}  // namespace

void register_depq(py::module_& m) {
    py::class_<Depq>(m, "DEPQ",
                     "Double-ended priority queue (min-max heap, Atkinson et al. 1986; DESIGN 3.4) of "
                     "(deadline: float seconds, id: uint64) keys ordered by (deadline, id).")
        .def(py::init<>())
        .def("push", &Depq::push, py::arg("deadline"), py::arg("id"),
             "Insert one key. O(log n). ValueError if deadline is NaN.")
        .def("pop_min", &Depq::pop_min, "Remove and return the smallest (deadline, id). IndexError if empty.")
        .def("pop_max", &Depq::pop_max, "Remove and return the largest (deadline, id). IndexError if empty.")
        .def("min", &Depq::min, "The smallest (deadline, id), O(1). IndexError if empty.")
        .def("max", &Depq::max, "The largest (deadline, id), O(1). IndexError if empty.")
        .def("push_many", &Depq::push_many, py::arg("deadlines"), py::arg("ids"),
             "Insert n keys from a float64 array (n,) and a uint64 array (n,); all or nothing. "
             "TypeError on a wrong dtype, ValueError on a wrong shape, unequal lengths or NaN.")
        .def("pop_min_many",
             [](Depq& q, py::ssize_t n) { return q.pop_many(n, true, "pop_min_many"); }, py::arg("n"),
             "Remove up to n smallest keys; returns (deadlines float64 (k,), ids uint64 (k,)) ascending, "
             "k = min(n, len). ValueError if n < 0.")
        .def("pop_max_many",
             [](Depq& q, py::ssize_t n) { return q.pop_many(n, false, "pop_max_many"); }, py::arg("n"),
             "Remove up to n largest keys; returns (deadlines float64 (k,), ids uint64 (k,)) descending, "
             "k = min(n, len). ValueError if n < 0.")
        .def("drain_min_while_below", &Depq::drain_min_while_below, py::arg("threshold"),
             "Remove every key with deadline < threshold; returns (deadlines, ids) ascending.")
        .def("clear", &Depq::clear, "Remove everything.")
        .def("empty", [](Depq& q) { return q.size() == 0; }, "True if no keys are queued.")
        .def("size", &Depq::size, "Number of keys queued.")
        .def("__len__", &Depq::size)
        .def("__repr__", [](Depq& q) { return "DEPQ(size=" + std::to_string(q.size()) + ")"; });
}

}  // namespace pard::bind
