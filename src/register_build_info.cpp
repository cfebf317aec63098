// build_info(): how this extension was compiled, for bug reports and `pard --version`.
#include <pybind11/stl.h>

#include <map>
#include <string>

#include "register.hpp"

#ifndef PARD_COMPILER
#define PARD_COMPILER "unknown"
#endif
#ifndef PARD_BUILD_TYPE
#define PARD_BUILD_TYPE "unknown"
#endif

namespace pard::bind {

void register_build_info(pybind11::module_& m) {
    m.def("build_info", [] {
        std::map<std::string, std::string> info{
            {"compiler", PARD_COMPILER},
            {"build_type", PARD_BUILD_TYPE},
            {"cplusplus", std::to_string(__cplusplus)},
            {"pybind11", std::to_string(PYBIND11_VERSION_MAJOR) + "." +
                             std::to_string(PYBIND11_VERSION_MINOR) + "." +
                             std::to_string(PYBIND11_VERSION_PATCH)},
        };
        return info;
    }, "Compiler, build type and pybind11 version of this build (dict of str).");
}

}  // namespace pard::bind
