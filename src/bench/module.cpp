// pard._core_bench: the C++-side timings bench/ and tests/ use, kept out of pard._core so that the
// package's core module holds only what the library runs.
#include <pybind11/pybind11.h>

#include "register_bench.hpp"

PYBIND11_MODULE(_core_bench, m) {
    m.doc() = "pard's C++ benchmarks (test-only: used by bench/ and tests/, never by the pard package)";
    pard::bind::register_bench(m);
}
