// pard/llm/length_model.hpp — the output-length distribution an LLM stage's cost model reads
// (pard/llm/stage_model.hpp): the interface of pard::llm::OutputLengthPredictor.
//
// This stand-in answers every quantile with the running mean of finished lengths (capped by the hint),
// so that the engine and the rules run before the predictor is wired in.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace pard::llm {

struct LengthConfig {
    std::int32_t max_output_tokens = 1024;
    double half_life = 2000.0;
    std::int32_t min_samples = 32;
    int tiers = 1;
};

class LengthModel {
public:
    struct Calibration {
        std::int64_t n;
        std::int64_t under;
    };
    explicit LengthModel(LengthConfig c) : c_(c) {}
    void observe(std::int32_t /*in_tokens*/, std::int32_t /*tier*/, std::int32_t out) {
        sum_ += out;
        ++n_;
    }
    [[nodiscard]] std::int32_t quantile(std::int32_t /*in_tokens*/, std::int32_t /*tier*/, std::int32_t hint,
                                        double /*p*/, std::int32_t generated = 0) const {
        const std::int32_t cap = hint > 0 ? std::min(hint, c_.max_output_tokens) : c_.max_output_tokens;
        std::int32_t q = n_ >= c_.min_samples ? static_cast<std::int32_t>(std::llround(sum_ / static_cast<double>(n_))) : cap;
        q = std::min(q, cap);
        return std::max(q, generated + 1);
    }
    void record_calibration(std::int32_t predicted, std::int32_t actual) {
        ++cal_.n;
        if (actual <= predicted) ++cal_.under;
    }
    [[nodiscard]] Calibration calibration() const { return cal_; }

private:
    LengthConfig c_;
    double sum_ = 0.0;
    std::int64_t n_ = 0;
    Calibration cal_{0, 0};
};

}  // namespace pard::llm
