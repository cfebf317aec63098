// The benchmark module's one concept; src/bench/module.cpp calls it.
#pragma once
#include <pybind11/pybind11.h>

namespace pard::bind {
void register_bench(pybind11::module_& m);
}  // namespace pard::bind
