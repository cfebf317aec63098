// Bindings for ComputeBook (cpp/include/pard/compute_split.hpp): where the compute went, for
// pard.ray's driver, which keeps its requests in Python. The simulator and the live pipeline keep
// their own ComputeSplit and hand it over as compute_split() (the same dict).
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "compute_split_dict.hpp"
#include "pard/compute_split.hpp"
#include "register.hpp"
#include "seconds.hpp"

namespace py = pybind11;

namespace pard::bind {
namespace {

// A pard.outcomes code as an Outcome; pending (0) is accepted where the caller has nothing better
// (it counts as not on time).
Outcome outcome(int code, const char* field) {
    if (code < static_cast<int>(Outcome::kPending) || code > static_cast<int>(Outcome::kFailed)) {
        throw std::invalid_argument(std::string(field) + " must hold outcome codes 0..5, got " + std::to_string(code));
    }
    return static_cast<Outcome>(code);
}

}  // namespace

void register_compute_split(py::module_& m) {
    py::class_<ComputeBook>(m, "ComputeBook",
                            "Useful, wasted and unresolved compute per stage, and drops before compute, of the "
                            "requests it is told of (pard/compute_split.hpp's rule). Not thread-safe.")
        .def(py::init([](int n_stages) {
                 if (n_stages < 1) throw std::invalid_argument("n_stages must be >= 1, got " + std::to_string(n_stages));
                 return ComputeBook(static_cast<std::size_t>(n_stages));
             }),
             py::arg("n_stages"))
        .def("open", &ComputeBook::open, py::arg("request_id"), "Request request_id is pending, nothing spent on it.")
        .def("forget", &ComputeBook::forget, py::arg("request_id"), "Drop request_id without an outcome (an undone submit).")
        .def("charge_batch",
             [](ComputeBook& b, int stage, const std::vector<std::uint64_t>& ids, double duration_s,
                const std::vector<int>& states) {
                 if (stage < 0) throw std::out_of_range("stage must be >= 0, got " + std::to_string(stage));
                 const std::int64_t ns = to_ns(duration_s, "duration_s");
                 if (ns < 0) throw std::invalid_argument("duration_s must be >= 0, got " + std::to_string(duration_s));
                 std::vector<Outcome> ended(states.size());
                 for (std::size_t i = 0; i < states.size(); ++i) ended[i] = outcome(states[i], "states");
                 if (!ids.empty()) b.charge_batch(static_cast<std::size_t>(stage), ids, ns, ended);
             },
             py::arg("stage"), py::arg("request_ids"), py::arg("duration_s"), py::arg("states"),
             "Stage `stage` ran the batch `request_ids` (batch order) for duration_s seconds: each request's share. "
             "states[i]: the outcome of request_ids[i] (pard.outcomes code), read only where it is not open "
             "(it ended before the batch was heard of).")
        .def("settle",
             [](ComputeBook& b, std::uint64_t id, int state) {
                 if (state == static_cast<int>(Outcome::kPending)) {
                     throw std::invalid_argument("state must be a terminal outcome code 1..5, got 0 (pending)");
                 }
                 b.settle(id, outcome(state, "state"));
             },
             py::arg("request_id"), py::arg("state"), "Request request_id ended in `state` (pard.outcomes code).")
        .def_property_readonly("pending", &ComputeBook::pending, "Requests open and not yet settled.")
        .def("split", [](const ComputeBook& b) { return split_dict(b.split()); },
             "{useful_s, wasted_s, unresolved_s (per stage, s), shed, shed_before_compute}.");
}

}  // namespace pard::bind
