// pard._core.MpmcRing (the lock-free ring of cpp/include/pard/mpmc_ring.hpp, of uint64 items) and
// ring_stress, the checked many-thread run of cpp/testing/ring_stress.hpp. try_push/try_pop
// are O(1) and keep the GIL; ring_stress releases it while its C++ threads run.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include "pard/mpmc_ring.hpp"
#include "ring_stress.hpp"
#include "register.hpp"

namespace py = pybind11;

namespace pard::bind {
namespace {

using Ring = MpmcRing<std::uint64_t>;

bool is_power_of_two_at_least_2(std::int64_t c) { return c >= 2 && (c & (c - 1)) == 0; }

std::int64_t require_range(std::int64_t v, std::int64_t lo, std::int64_t hi, const char* fn, const char* arg) {
    if (v < lo || v > hi) {
        throw py::value_error(std::string(fn) + ": '" + arg + "' must be in [" + std::to_string(lo) + ", " +
                              std::to_string(hi) + "], got " + std::to_string(v));
    }
    return v;
}

}  // namespace

void register_ring(py::module_& m) {
    py::class_<Ring>(m, "MpmcRing",
                     "Bounded lock-free multi-producer multi-consumer FIFO ring of uint64 items "
                     "(Vyukov's per-slot sequence numbers; DESIGN 3.4). FIFO per producer; try_push on a "
                     "full ring returns False and try_pop on an empty one returns None, never blocking.")
        .def(py::init([](std::int64_t capacity) {
                 if (!is_power_of_two_at_least_2(capacity) || capacity > (std::int64_t{1} << 40)) {
                     throw py::value_error("MpmcRing: 'capacity' must be a power of two in [2, 2^40], got " +
                                           std::to_string(capacity));
                 }
                 return new Ring(static_cast<std::size_t>(capacity));
             }),
             py::arg("capacity"))
        .def_property_readonly("capacity", &Ring::capacity, "Number of slots (a power of two).")
        .def("try_push", &Ring::try_push, py::arg("item"),
             "Append a uint64 item; False (item not stored) if the ring is full.")
        .def(
            "try_pop",
            [](Ring& r) -> py::object {
                std::uint64_t out = 0;
                if (r.try_pop(out)) return py::int_(out);
                return py::none();
            },
            "Remove and return the oldest item, or None if the ring is empty.")
        .def("size_approx", &Ring::size_approx,
             "Items queued; exact when no other thread is pushing or popping, best-effort otherwise.")
        .def("__repr__", [](const Ring& r) {
            return "MpmcRing(capacity=" + std::to_string(r.capacity()) + ", size_approx=" +
                   std::to_string(r.size_approx()) + ")";
        });

    m.def(
        "ring_stress",
        [](std::int64_t producers, std::int64_t consumers, std::int64_t items_per_producer, std::int64_t capacity) {
            require_range(producers, 1, 256, "ring_stress", "producers");
            require_range(consumers, 1, 256, "ring_stress", "consumers");
            require_range(items_per_producer, 0, (std::int64_t{1} << 40) - 1, "ring_stress", "items_per_producer");
            if (!is_power_of_two_at_least_2(capacity) || capacity > (std::int64_t{1} << 40)) {
                throw py::value_error("ring_stress: 'capacity' must be a power of two in [2, 2^40], got " +
                                      std::to_string(capacity));
            }
            RingStressResult r;
            {
                py::gil_scoped_release release;
                r = ring_stress(static_cast<unsigned>(producers), static_cast<unsigned>(consumers),
                                static_cast<std::uint64_t>(items_per_producer), static_cast<std::size_t>(capacity));
            }
            py::dict d;
            d["expected"] = r.expected;
            d["received"] = r.received;
            d["duplicates"] = r.duplicates;
            d["missing"] = r.missing;
            d["out_of_range"] = r.out_of_range;
            d["fifo_violations"] = r.fifo_violations;
            d["seq_sum"] = r.seq_sum;
            d["producer_sum"] = r.producer_sum;
            d["full_retries"] = r.full_retries;
            d["empty_polls"] = r.empty_polls;
            d["seconds"] = r.seconds;
            return d;
        },
        py::arg("producers"), py::arg("consumers"), py::arg("items_per_producer"), py::arg("capacity"),
        "Run P producer and C consumer C++ threads over one MpmcRing (GIL released). Producer p pushes "
        "(p << 40) | s for s in range(items_per_producer). Returns counts checked in C++: expected, "
        "received, duplicates, missing, out_of_range, fifo_violations (per producer, per consumer), "
        "seq_sum and producer_sum (for closed-form checks), full_retries, empty_polls, seconds.");
}

}  // namespace pard::bind
