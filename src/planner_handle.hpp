// The planner as Python holds it (register_planner.cpp) and the statistics dicts both bindings of the
// per-sync work read (register_planner.cpp, register_sim_sync.cpp).
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "pard/simulator.hpp"
#include "pard/sync_planner.hpp"
#include "seconds.hpp"

namespace pard::bind {

// A SyncPlanner and the numpy Generator whose bit generator it draws from (kept alive here).
struct PySyncPlanner {
    pybind11::object generator;
    std::unique_ptr<SyncPlanner> core;
};

// NumPy's bitgen_t (numpy/random/bitgen.h), the object behind BitGenerator.capsule.
struct NumpyBitgen {
    void* state;
    std::uint64_t (*next_uint64)(void*);
    std::uint32_t (*next_uint32)(void*);
    double (*next_double)(void*);
    std::uint64_t (*next_raw)(void*);
};

// The draws of a numpy.random.Generator, for the planner's Monte Carlo.
inline npo::BitSource bits_of(const pybind11::object& generator) {
    pybind11::object capsule = generator.attr("bit_generator").attr("capsule");
    auto* bg = static_cast<NumpyBitgen*>(PyCapsule_GetPointer(capsule.ptr(), "BitGenerator"));
    if (bg == nullptr) throw pybind11::error_already_set();
    npo::BitSource bits;
    bits.state = bg->state;
    bits.next_uint32 = bg->next_uint32;
    bits.next_double = bg->next_double;
    return bits;
}

inline std::vector<std::int64_t> int_vector(const pybind11::handle& h, const char* key) {
    auto a = pybind11::array_t<std::int64_t, pybind11::array::c_style | pybind11::array::forcecast>::ensure(h);
    if (!a) throw std::invalid_argument(std::string("statistics: ") + key + " must be an array of integers (ns)");
    return std::vector<std::int64_t>(a.data(), a.data() + a.size());
}

// One stage's statistics from a dict of int64 ns arrays (keys as StageStats' fields).
inline StageStats stats_from_ns(const pybind11::dict& d) {
    StageStats s;
    auto get = [&](const char* key, std::vector<std::int64_t>& out) {
        if (d.contains(key)) out = int_vector(d[key], key);
    };
    get("arrival", s.arrival);
    get("qdelay_t", s.qdelay_t);
    get("qdelay", s.qdelay);
    get("batch_start", s.batch_start);
    get("batch_size", s.batch_size);
    get("batch_wait", s.batch_wait);
    get("batch_duration", s.batch_duration);
    if (d.contains("dropped")) s.dropped = d["dropped"].cast<std::int64_t>();
    if (d.contains("late")) s.late = d["late"].cast<std::int64_t>();
    return s;
}

// d[key] as a float64 array (forcecast), or null when the key is absent; invalid_argument naming the key
// when it is not an array of numbers.
inline pybind11::array_t<double, pybind11::array::c_style | pybind11::array::forcecast>
seconds_array(const pybind11::dict& d, const char* key) {
    using Arr = pybind11::array_t<double, pybind11::array::c_style | pybind11::array::forcecast>;
    if (!d.contains(key)) return Arr();
    auto a = Arr::ensure(d[key]);
    if (!a) throw std::invalid_argument(std::string("statistics: ") + key + " must be an array of float seconds");
    return a;
}

// What the planner reads of one stage's statistics, from a dict of float-second arrays as the live
// runtime and Ray take them (keys arrival_s, qdelay_s, batch_duration_s, batch_wait_s; batch_size ints).
inline PlannerStats planner_stats_from_seconds(const pybind11::dict& d) {
    PlannerStats s;
    auto get = [&](const char* key, std::vector<double>& out) {
        auto a = seconds_array(d, key);
        if (!a) return;
        out.assign(a.data(), a.data() + a.size());
        for (double x : out) {
            if (!std::isfinite(x)) throw std::invalid_argument(std::string("statistics: ") + key + " holds a non-finite value");
        }
    };
    if (d.contains("arrival_s")) s.arrivals = static_cast<std::size_t>(pybind11::len(d["arrival_s"]));
    get("qdelay_s", s.qdelay_s);
    get("batch_wait_s", s.batch_wait_s);
    get("batch_duration_s", s.batch_duration_s);
    if (d.contains("batch_size")) s.batch_size = int_vector(d["batch_size"], "batch_size");
    return s;
}

// What the recorder reads of one stage's statistics, from a dict of float-second arrays (keys arrival_s,
// qdelay_t_s, qdelay_s, batch_duration_s; batch_size ints), in the simulator's int64 ns form. Arrivals
// count only, so they are not converted.
inline StageStats recorder_stats_from_seconds(const pybind11::dict& d) {
    StageStats s;
    auto get = [&](const char* key, std::vector<std::int64_t>& out) {
        auto a = seconds_array(d, key);
        if (!a) return;
        out.resize(static_cast<std::size_t>(a.size()));
        const double* p = a.data();
        for (std::size_t i = 0; i < out.size(); ++i) out[i] = to_ns(p[i], key);
    };
    if (d.contains("arrival_s")) s.arrival.resize(static_cast<std::size_t>(pybind11::len(d["arrival_s"])));
    get("qdelay_t_s", s.qdelay_t);
    get("qdelay_s", s.qdelay);
    get("batch_duration_s", s.batch_duration);
    if (d.contains("batch_size")) s.batch_size = int_vector(d["batch_size"], "batch_size");
    return s;
}

}  // namespace pard::bind
