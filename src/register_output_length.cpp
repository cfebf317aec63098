// Bindings for pard::llm::OutputLengthPredictor (cpp/include/pard/llm/output_length.hpp): the online
// output-length distribution of an LLM stage. Token counts are ints (a float is a TypeError, not a
// silent truncation); bad values raise ValueError naming the field. Public entry: pard.llm.
#include <pybind11/stl.h>

#include <cstdint>
#include <string>

#include "pard/llm/output_length.hpp"
#include "register.hpp"

namespace py = pybind11;

namespace pard::bind {

void register_output_length(py::module_& m) {
    using llm::OutputLengthConfig;
    using llm::OutputLengthPredictor;
    py::class_<OutputLengthPredictor>(m, "OutputLengthPredictor",
                                      "Online quantiles of an LLM stage's output length (tokens), conditioned on the "
                                      "input-length bucket, tier and hint. Not thread-safe.")
        .def(py::init([](std::int32_t max_output_tokens, double half_life, std::int32_t min_samples, int tiers) {
                 OutputLengthConfig c;
                 c.max_output_tokens = max_output_tokens;
                 c.half_life = half_life;
                 c.min_samples = min_samples;
                 c.tiers = tiers;
                 return OutputLengthPredictor(c);
             }),
             py::kw_only(), py::arg("max_output_tokens") = 1024, py::arg("half_life") = 2000.0,
             py::arg("min_samples") = 32, py::arg("tiers") = 1)
        .def("observe", &OutputLengthPredictor::observe, py::arg("in_tokens"), py::arg("tier"), py::arg("out_tokens"),
             "A finished request: its input tokens (0 = unknown), tier and output tokens (>= 1).")
        .def("quantile", &OutputLengthPredictor::quantile, py::arg("in_tokens"), py::arg("tier"), py::arg("hint"),
             py::arg("p"), py::arg("generated") = 0,
             "The p-quantile (0 < p < 1) of the output length given `generated` tokens out: in [generated + 1, "
             "cap], cap = min(hint, max_output_tokens) (hint 0 = none); the cap before min_samples are seen.")
        .def("record_calibration", &OutputLengthPredictor::record_calibration, py::arg("predicted"),
             py::arg("actual"), "A request predicted `predicted` tokens at admission finished with `actual`.")
        .def("calibration",
             [](const OutputLengthPredictor& p) {
                 const auto c = p.calibration();
                 return py::make_tuple(c.n, c.under);
             },
             "(n, under): calibration records, and those with actual <= predicted.")
        .def("cell_mass", &OutputLengthPredictor::cell_mass, py::arg("in_tokens"), py::arg("tier"),
             "Decayed mass (the newest sample weighs 1) of the condition cell of (in_tokens, tier).")
        .def_property_readonly("observed", &OutputLengthPredictor::observed)
        .def_property_readonly("bin_edges", &OutputLengthPredictor::bin_edges,
                               "Bin i holds lengths [bin_edges[i], bin_edges[i + 1]); the last is max_output_tokens + 1.")
        .def_property_readonly("max_output_tokens",
                               [](const OutputLengthPredictor& p) { return p.config().max_output_tokens; })
        .def_property_readonly("half_life", [](const OutputLengthPredictor& p) { return p.config().half_life; })
        .def_property_readonly("min_samples", [](const OutputLengthPredictor& p) { return p.config().min_samples; })
        .def_property_readonly("tiers", [](const OutputLengthPredictor& p) { return p.config().tiers; })
        .def_static("input_bucket", &OutputLengthPredictor::input_bucket, py::arg("in_tokens"),
                    "The log2 bucket of an input length: 0 for 0 (unknown), else its bit width, at most 15.");
}

}  // namespace pard::bind
