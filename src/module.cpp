// pard._core: wiring only. Each concept registers itself from its own register_<concept>.cpp.
#include <pybind11/pybind11.h>

#include "register.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_core, m) {
    m.doc() = "pard's C++ core (private: import pard, not pard._core)";
    pard::bind::register_build_info(m);
    pard::bind::register_depq(m);
    pard::bind::register_ring(m);
    pard::bind::register_scheduler(m);
    pard::bind::register_sim(m);
    pard::bind::register_planner(m);
    pard::bind::register_sim_sync(m);
    pard::bind::register_live(m);
    pard::bind::register_compute_split(m);
    pard::bind::register_output_length(m);
}
