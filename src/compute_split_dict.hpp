// A ComputeSplit (cpp/include/pard/compute_split.hpp) as the dict every engine hands to Python:
// useful_s, wasted_s, unresolved_s (per stage, float64 seconds), shed and shed_before_compute (int).
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <vector>

#include "pard/compute_split.hpp"
#include "seconds.hpp"

namespace pard::bind {

inline pybind11::dict split_dict(const ComputeSplit& s) {
    auto seconds = [](const std::vector<std::int64_t>& v) {
        pybind11::array_t<double> a(static_cast<pybind11::ssize_t>(v.size()));
        double* p = a.mutable_data();
        for (std::size_t i = 0; i < v.size(); ++i) p[i] = to_s(v[i]);
        return a;
    };
    pybind11::dict d;
    d["useful_s"] = seconds(s.useful_ns());
    d["wasted_s"] = seconds(s.wasted_ns());
    d["unresolved_s"] = seconds(s.unresolved_ns());
    d["shed"] = s.shed();
    d["shed_before_compute"] = s.shed_before_compute();
    return d;
}

}  // namespace pard::bind
