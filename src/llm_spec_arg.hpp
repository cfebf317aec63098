// An LLM stage's spec from the dict the Python side builds (pard.wiring.llm_arg): one reading for the
// simulator's stages and the live StageScheduler, with field-named errors; and its calibration as both give it.
#pragma once

#include <pybind11/pybind11.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "pard/llm/stage_model.hpp"
#include "pard/profile.hpp"
#include "seconds.hpp"

namespace pard::bind {

// The keys an LLM stage's dict carries.
inline constexpr const char* kLlmKeys[] = {"prefill_base_s", "prefill_per_token_s", "decode", "max_seqs", "kv_tokens",
                                           "max_output_tokens"};

// Reads and validates `d` (`where` names it in errors): std::invalid_argument or pybind11::type_error naming
// the key and the value.
inline llm::LlmStageSpec llm_spec_from(const pybind11::dict& d, const std::string& where) {
    for (const char* key : kLlmKeys) {
        if (!d.contains(key)) throw std::invalid_argument(where + " is missing the key '" + std::string(key) + "'");
    }
    if (!pybind11::isinstance<Profile>(d["decode"])) {
        throw pybind11::type_error(where + ".decode must be a pard._core.Profile");
    }
    llm::LlmStageSpec sp;
    sp.decode = d["decode"].cast<Profile>();
    sp.prefill_base_ns = to_ns(d["prefill_base_s"].cast<double>(), "prefill_base_s");
    const double per_token_s = d["prefill_per_token_s"].cast<double>();
    if (!(std::isfinite(per_token_s) && per_token_s >= 0.0 && per_token_s <= 1.0)) {
        throw std::invalid_argument(where + ".prefill_per_token_s=" + std::to_string(per_token_s) + " must be in [0, 1] s");
    }
    sp.prefill_per_token_ns = per_token_s * 1e9;
    sp.max_seqs = d["max_seqs"].cast<std::int64_t>();
    sp.kv_tokens = d["kv_tokens"].cast<std::int64_t>();
    sp.max_output_tokens = d["max_output_tokens"].cast<std::int32_t>();
    sp.validate(where);
    return sp;
}

// An LLM stage's output-length calibration as Python reads it: {quantile, token_aware, n, under}.
inline pybind11::dict calibration_dict(const llm::LlmCost& c) {
    const auto cal = c.calibration();
    pybind11::dict e;
    e["quantile"] = c.quantile();
    e["token_aware"] = c.token_aware();
    e["n"] = cal.n;
    e["under"] = cal.under;
    return e;
}

}  // namespace pard::bind
