// One declaration per register_<concept>.cpp; module.cpp calls each once.
#pragma once
#include <pybind11/pybind11.h>

namespace pard::bind {
void register_build_info(pybind11::module_& m);
void register_depq(pybind11::module_& m);
void register_ring(pybind11::module_& m);
void register_scheduler(pybind11::module_& m);
void register_sim(pybind11::module_& m);
void register_planner(pybind11::module_& m);
void register_sim_sync(pybind11::module_& m);  // after register_sim and register_planner: adds Simulator.sync
void register_live(pybind11::module_& m);
void register_compute_split(pybind11::module_& m);
void register_output_length(pybind11::module_& m);
}  // namespace pard::bind
