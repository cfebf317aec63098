// OutputLengthPredictor: an online, decayed distribution of an LLM stage's output lengths (tokens), and
// its quantiles conditioned on what is known of a request at admission and during decode (DESIGN §3.8).
//
// Idea: the output length is unknown until the end-of-sequence token, so a deadline rule has to use a
// distribution of it learned from the requests that finished (SCORPIO and SageSched schedule LLM
// requests on such online length distributions; the histogram below is our own).
//
// Algorithm. Each finished request adds one sample to three histograms: its condition cell (log2
// bucket of its input length x its tier), the pool of its input bucket (every tier) and the global
// pool. A cell falls back to its input bucket's pool first because the input length says more about
// the output than the tier, which is a priority, not a kind of prompt.
//
// Bins are log-spaced: one per token up to 13, then eighth octaves (a bin is about 9 % of its lower
// edge wide), so the relative resolution is the same for a 20-token and a 900-token answer and the
// number of bins grows with log(max_output_tokens). Eighth rather than quarter octaves because real
// outputs have spikes at one length (a conversation trace's cluster at 388-414 tokens), and a spike
// spread evenly over a wide bin biases the quantiles near it by up to half the bin. Inside a bin the
// mass is spread evenly over its integer lengths, so an answer is exact to within its bin.
//
// A quantile reads one histogram: the first of cell, input pool, global pool whose mass above the
// tokens already generated is at least that of `min_samples` fresh samples (a sparse cell borrows its
// neighbours' data rather than answer from a few samples); else the global pool if it has any such
// mass and holds that much in all; else the prior, the cap.
//
// Drift: the weight of a sample halves every `half_life` samples observed (by the whole predictor, so
// a cell nobody asks about grows stale and its pool takes over). It is done without touching old bins:
// each new sample is added with a weight that grows by 2^(1/half_life) per observe, and every weight is
// read relative to the newest; when the increment grows large, every histogram is renormalised once.
//
// Conditioning. generated = g tokens already out means the length is > g: the quantile reads only the
// mass above g (a partial first bin counts its share). A hint h (the client's max_tokens) caps the
// engine's output at min(h, max_output_tokens), so the quantile of the capped length is the capped
// quantile: observe() does not need the hint.
//
// Contract: not thread-safe (one stage's batch-forming lock serialises it); observe() and quantile()
// allocate nothing (storage is fixed at construction: at most 16 x 16 cells + 17 pools, 63 bins each
// at max_output_tokens = 1024); bad config or arguments throw std::invalid_argument naming the field
// and the value.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace pard::llm {

struct OutputLengthConfig {
    std::int32_t max_output_tokens = 1024;  // the engine's cap and the prior before data
    double half_life = 2000.0;              // samples after which a sample weighs half
    std::int32_t min_samples = 32;          // mass a histogram needs before it answers
    int tiers = 1;                          // tier codes 0..tiers-1; cells for at most kMaxTiers
};

class OutputLengthPredictor {
public:
    // Log2 buckets of the input length: 0 (unknown), 1, 2-3, 4-7, ..., >= 2^14 share the last one.
    static constexpr int kInputBuckets = 16;
    // Tiers beyond this share the last tier's cells: memory stays bounded whatever a spec declares.
    static constexpr int kMaxTiers = 16;
    // Bins per doubling of the length (see the header comment).
    static constexpr int kBinsPerOctave = 8;

    struct Calibration {
        std::int64_t n;
        std::int64_t under;  // actual <= predicted
    };

    explicit OutputLengthPredictor(OutputLengthConfig cfg) : cfg_(cfg) {
        if (cfg.max_output_tokens < 1) {
            throw std::invalid_argument("OutputLengthConfig: max_output_tokens must be >= 1, got " +
                                        std::to_string(cfg.max_output_tokens));
        }
        if (!(cfg.half_life >= 1.0) || !std::isfinite(cfg.half_life)) {
            throw std::invalid_argument("OutputLengthConfig: half_life must be finite and >= 1 (samples), got " +
                                        std::to_string(cfg.half_life));
        }
        if (cfg.min_samples < 1) {
            throw std::invalid_argument("OutputLengthConfig: min_samples must be >= 1, got " +
                                        std::to_string(cfg.min_samples));
        }
        if (cfg.tiers < 1) {
            throw std::invalid_argument("OutputLengthConfig: tiers must be >= 1, got " + std::to_string(cfg.tiers));
        }
        tier_cells_ = std::min(cfg.tiers, kMaxTiers);
        growth_ = std::exp2(1.0 / cfg.half_life);
        // "min_samples seen" in decayed mass: what the min_samples newest samples weigh together,
        // (1 - 2^(-m/h)) / (1 - 2^(-1/h)), a hair lower for rounding. A steady stream always reaches it.
        const double ln2 = std::log(2.0);
        const double m = static_cast<double>(cfg.min_samples);
        need_ = std::expm1(-m * ln2 / cfg.half_life) / std::expm1(-ln2 / cfg.half_life) * (1.0 - 1e-9);
        build_edges();
        rows_ = static_cast<std::size_t>(kInputBuckets * tier_cells_ + kInputBuckets + 1);
        bins_.assign(rows_ * n_bins_, 0.0);
        totals_.assign(rows_, 0.0);
    }

    // A finished request: in_tokens >= 0 (0 = unknown), tier >= 0, out_tokens >= 1 (lengths above
    // max_output_tokens count as max_output_tokens, where the engine stops).
    void observe(std::int32_t in_tokens, std::int32_t tier, std::int32_t out_tokens) {
        check_in_tier(in_tokens, tier, "observe");
        if (out_tokens < 1) {
            throw std::invalid_argument("OutputLengthPredictor.observe: out_tokens must be >= 1, got " +
                                        std::to_string(out_tokens));
        }
        const std::int32_t len = std::min(out_tokens, cfg_.max_output_tokens);
        const std::size_t bin = bin_of(len);
        const int b = input_bucket(in_tokens);
        increment_ *= growth_;
        add(cell_row(b, fold_tier(tier)), bin);
        add(pool_row(b), bin);
        add(global_row(), bin);
        ++observed_;
        // Renormalise long before overflow: old weights shrink towards 0, which is what decay means.
        if (increment_ > 1e150) renormalise();
    }

    // The p-quantile (0 < p < 1) of the output length of a request with `in_tokens` input tokens,
    // tier `tier` and hint `hint` (0 = none) that has already generated `generated` tokens:
    // in [generated + 1, cap] with cap = min(hint, max_output_tokens) (max_output_tokens without a
    // hint); the prior `cap` before min_samples are seen. generated >= cap throws (the engine stops a
    // sequence at its cap).
    std::int32_t quantile(std::int32_t in_tokens, std::int32_t tier, std::int32_t hint, double p,
                          std::int32_t generated = 0) const {
        check_in_tier(in_tokens, tier, "quantile");
        if (!(p > 0.0 && p < 1.0)) {
            throw std::invalid_argument("OutputLengthPredictor.quantile: p must be in (0, 1), got " + std::to_string(p));
        }
        if (hint < 0) {
            throw std::invalid_argument("OutputLengthPredictor.quantile: hint must be >= 0 (0 = none), got " +
                                        std::to_string(hint));
        }
        const std::int32_t cap = hint > 0 ? std::min(hint, cfg_.max_output_tokens) : cfg_.max_output_tokens;
        if (generated < 0 || generated >= cap) {
            throw std::invalid_argument("OutputLengthPredictor.quantile: generated must be in [0, " +
                                        std::to_string(cap - 1) + "] (below the cap), got " + std::to_string(generated));
        }
        const double need = need_ * increment_;
        if (totals_[global_row()] < need) return cap;
        const int b = input_bucket(in_tokens);
        const std::size_t levels[3] = {cell_row(b, fold_tier(tier)), pool_row(b), global_row()};
        std::size_t row = global_row();
        double mass = 0.0;
        for (std::size_t level : levels) {
            mass = mass_above(level, generated);
            row = level;
            if (mass >= need) break;
        }
        if (!(mass > 0.0)) return cap;  // it has outlived every sample kept: nothing to say but the cap
        return std::min(cap, read_quantile(row, generated, p * mass));
    }

    // Calibration: a request predicted `predicted` tokens at admission finished with `actual`.
    void record_calibration(std::int32_t predicted, std::int32_t actual) {
        if (predicted < 1) {
            throw std::invalid_argument("OutputLengthPredictor.record_calibration: predicted must be >= 1, got " +
                                        std::to_string(predicted));
        }
        if (actual < 0) {
            throw std::invalid_argument("OutputLengthPredictor.record_calibration: actual must be >= 0, got " +
                                        std::to_string(actual));
        }
        ++calibration_.n;
        if (actual <= predicted) ++calibration_.under;
    }

    Calibration calibration() const noexcept { return calibration_; }

    const OutputLengthConfig& config() const noexcept { return cfg_; }
    std::int64_t observed() const noexcept { return observed_; }
    // Lower edges of the bins, then max_output_tokens + 1: bin i holds lengths [edges[i], edges[i+1]).
    const std::vector<std::int32_t>& bin_edges() const noexcept { return edges_; }
    // The decayed mass (the newest sample weighs 1) of the cell of (in_tokens, tier).
    double cell_mass(std::int32_t in_tokens, std::int32_t tier) const {
        check_in_tier(in_tokens, tier, "cell_mass");
        return totals_[cell_row(input_bucket(in_tokens), fold_tier(tier))] / increment_;
    }

    static int input_bucket(std::int32_t in_tokens) noexcept {
        int b = 0;
        for (std::uint32_t v = static_cast<std::uint32_t>(in_tokens); v != 0; v >>= 1) ++b;
        return std::min(b, kInputBuckets - 1);
    }

private:
    void check_in_tier(std::int32_t in_tokens, std::int32_t tier, const char* call) const {
        if (in_tokens < 0) {
            throw std::invalid_argument(std::string("OutputLengthPredictor.") + call +
                                        ": in_tokens must be >= 0 (0 = unknown), got " + std::to_string(in_tokens));
        }
        if (tier < 0) {
            throw std::invalid_argument(std::string("OutputLengthPredictor.") + call + ": tier must be >= 0, got " +
                                        std::to_string(tier));
        }
    }

    int fold_tier(std::int32_t tier) const noexcept { return std::min(static_cast<int>(tier), tier_cells_ - 1); }
    std::size_t cell_row(int b, int t) const noexcept { return static_cast<std::size_t>(b * tier_cells_ + t); }
    std::size_t pool_row(int b) const noexcept { return static_cast<std::size_t>(kInputBuckets * tier_cells_ + b); }
    std::size_t global_row() const noexcept { return rows_ - 1; }

    // Edges at round(2^(k/kBinsPerOctave)), duplicates removed: unit bins while a step is under a token.
    void build_edges() {
        const std::int32_t end = cfg_.max_output_tokens + 1;
        edges_.push_back(1);
        for (int k = 1;; ++k) {
            const double e = std::round(std::exp2(static_cast<double>(k) / kBinsPerOctave));
            if (e >= static_cast<double>(end)) break;
            const auto edge = static_cast<std::int32_t>(e);
            if (edge > edges_.back()) edges_.push_back(edge);
        }
        edges_.push_back(end);
        n_bins_ = edges_.size() - 1;
    }

    std::size_t bin_of(std::int32_t len) const noexcept {
        const auto it = std::upper_bound(edges_.begin(), edges_.end(), len);
        return static_cast<std::size_t>(it - edges_.begin()) - 1;
    }

    void add(std::size_t row, std::size_t bin) noexcept {
        bins_[row * n_bins_ + bin] += increment_;
        totals_[row] += increment_;
    }

    void renormalise() noexcept {
        const double s = 1.0 / increment_;
        for (double& w : bins_) w = w * s < 1e-250 ? 0.0 : w * s;  // no denormals in later sums
        for (std::size_t r = 0; r < rows_; ++r) {
            double t = 0.0;
            for (std::size_t i = 0; i < n_bins_; ++i) t += bins_[r * n_bins_ + i];
            totals_[r] = t;
        }
        increment_ = 1.0;
    }

    // Stored mass of `row` at lengths > g; the bin holding g + 1 counts its share above g. At admission
    // (g = 0) that is the row's total, kept by observe(), so choosing a level costs no scan.
    double mass_above(std::size_t row, std::int32_t g) const noexcept {
        if (g == 0) return totals_[row];
        const double* w = &bins_[row * n_bins_];
        const std::size_t first = bin_of(g + 1);
        double m = w[first] * share_from(first, g + 1);
        for (std::size_t i = first + 1; i < n_bins_; ++i) m += w[i];
        return m;
    }

    double share_from(std::size_t bin, std::int32_t from) const noexcept {
        const auto lo = edges_[bin], hi = edges_[bin + 1];
        return static_cast<double>(hi - from) / static_cast<double>(hi - lo);
    }

    // The smallest length x > g whose mass in (g, x] reaches `target` (stored units).
    std::int32_t read_quantile(std::size_t row, std::int32_t g, double target) const noexcept {
        const double* w = &bins_[row * n_bins_];
        const std::size_t first = bin_of(g + 1);
        double cum = 0.0;
        for (std::size_t i = first; i < n_bins_; ++i) {
            // The same masses as mass_above() sums, so the target it scaled is met inside the row.
            const double m = i == first ? w[i] * share_from(i, g + 1) : w[i];
            if (m > 0.0 && cum + m >= target) {
                const std::int32_t lo = std::max(edges_[i], g + 1), hi = edges_[i + 1];
                const double per_token = w[i] / static_cast<double>(edges_[i + 1] - edges_[i]);
                const double k = std::ceil((target - cum) / per_token);  // tokens of this bin needed
                const auto need = static_cast<std::int32_t>(std::clamp(k, 1.0, static_cast<double>(hi - lo)));
                return lo + need - 1;
            }
            cum += m;
        }
        return edges_[n_bins_] - 1;  // rounding left target a hair above the sum: the last length
    }

    OutputLengthConfig cfg_;
    int tier_cells_ = 1;
    double growth_ = 1.0;
    double need_ = 1.0;       // mass (newest = 1) a histogram needs to answer
    double increment_ = 1.0;  // weight of the newest sample, in stored units
    std::vector<std::int32_t> edges_;
    std::size_t n_bins_ = 0;
    std::size_t rows_ = 0;
    std::vector<double> bins_;    // rows_ x n_bins_: cells, then input pools, then the global pool
    std::vector<double> totals_;  // per row, the sum of its bins
    std::int64_t observed_ = 0;
    Calibration calibration_{0, 0};
};

}  // namespace pard::llm
