// pard/profile.hpp — Profile: a stage's batch execution duration d(b) (DESIGN §2, §3.2).
//
// A profile is a list of measured points (b_i, d_i): batch size b_i (positive, strictly
// increasing) and its execution duration d_i (positive, non-decreasing), in int64 nanoseconds.
// duration_ns(b) is piecewise-linear through the points:
//   * b below the first point: clamped to d_0 (a smaller batch is never assumed faster than the
//     smallest measured one, so the drop rule never under-estimates from extrapolation);
//   * b between two points: linear interpolation, rounded to the nearest nanosecond;
//   * b past the last point: linear extrapolation along the last segment (a single point: constant).
// Lookups for b in [1, last measured b] hit a precomputed table (O(1), no division on the hot path).
// Bad input throws std::invalid_argument naming the field and the value (the bindings turn it into
// ValueError).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace pard {

class Profile {
public:
    Profile() : Profile(std::vector<std::int64_t>{1}, std::vector<std::int64_t>{1}) {}

    Profile(std::vector<std::int64_t> batch_sizes, std::vector<std::int64_t> durations_ns)
        : b_(std::move(batch_sizes)), d_(std::move(durations_ns)) {
        if (b_.empty()) throw std::invalid_argument("Profile: batch_sizes is empty; need at least one point");
        if (b_.size() != d_.size()) {
            throw std::invalid_argument("Profile: batch_sizes has " + std::to_string(b_.size()) +
                                        " points but durations has " + std::to_string(d_.size()));
        }
        for (std::size_t i = 0; i < b_.size(); ++i) {
            if (b_[i] < 1) {
                throw std::invalid_argument("Profile: batch_sizes[" + std::to_string(i) + "]=" +
                                            std::to_string(b_[i]) + " must be a positive integer");
            }
            if (d_[i] <= 0) {
                throw std::invalid_argument("Profile: durations[" + std::to_string(i) + "]=" +
                                            std::to_string(d_[i]) + " ns must be positive");
            }
            if (i > 0 && b_[i] <= b_[i - 1]) {
                throw std::invalid_argument("Profile: batch_sizes[" + std::to_string(i) + "]=" +
                                            std::to_string(b_[i]) + " must be greater than batch_sizes[" +
                                            std::to_string(i - 1) + "]=" + std::to_string(b_[i - 1]) +
                                            " (strictly increasing)");
            }
            if (i > 0 && d_[i] < d_[i - 1]) {
                throw std::invalid_argument("Profile: durations[" + std::to_string(i) + "]=" +
                                            std::to_string(d_[i]) + " ns is smaller than durations[" +
                                            std::to_string(i - 1) + "]=" + std::to_string(d_[i - 1]) +
                                            " ns (must be non-decreasing)");
            }
        }
        if (b_.back() > kMaxTable) {
            throw std::invalid_argument("Profile: batch_sizes[-1]=" + std::to_string(b_.back()) +
                                        " exceeds the supported maximum " + std::to_string(kMaxTable));
        }
        table_.resize(static_cast<std::size_t>(b_.back()) + 1);
        table_[0] = d_[0];
        for (std::int64_t b = 1; b <= b_.back(); ++b) table_[static_cast<std::size_t>(b)] = compute(b);
    }

    // Seconds-based factory for the bindings: durations must be finite and positive.
    static Profile from_seconds(const std::vector<std::int64_t>& batch_sizes,
                                const std::vector<double>& durations_s) {
        std::vector<std::int64_t> ns;
        ns.reserve(durations_s.size());
        for (std::size_t i = 0; i < durations_s.size(); ++i) {
            const double s = durations_s[i];
            if (!std::isfinite(s) || s <= 0.0 || s > 1e9) {
                throw std::invalid_argument("Profile: durations_s[" + std::to_string(i) + "]=" +
                                            std::to_string(s) + " must be finite and positive");
            }
            const auto v = static_cast<std::int64_t>(std::llround(s * 1e9));
            ns.push_back(v < 1 ? 1 : v);
        }
        return Profile(batch_sizes, std::move(ns));
    }

    // d(b) in ns for b >= 1 (callers validate b; b < 1 is treated as 1).
    [[nodiscard]] std::int64_t duration_ns(std::int64_t b) const noexcept {
        if (b < 1) b = 1;
        if (b <= b_.back()) return table_[static_cast<std::size_t>(b)];
        return compute(b);
    }

    [[nodiscard]] std::int64_t max_batch() const noexcept { return b_.back(); }
    [[nodiscard]] const std::vector<std::int64_t>& batch_sizes() const noexcept { return b_; }
    [[nodiscard]] const std::vector<std::int64_t>& durations_ns() const noexcept { return d_; }

    static constexpr std::int64_t kMaxTable = 1 << 20;

private:
    [[nodiscard]] std::int64_t compute(std::int64_t b) const noexcept {
        const std::size_t n = b_.size();
        if (b <= b_[0]) return d_[0];
        if (n == 1) return d_[0];
        // Segment [i, i+1] containing b (b_[i] < b <= b_[i+1]), or the last segment for extrapolation.
        // A binary search: filling the table scans every b up to the largest point, and a profile may
        // hold a point per batch size (a linear scan made that quadratic: minutes for 10^6 points).
        const auto j = static_cast<std::size_t>(std::lower_bound(b_.begin(), b_.end(), b) - b_.begin());
        const std::size_t i = std::min(n - 2, j - 1);
        const double slope = static_cast<double>(d_[i + 1] - d_[i]) / static_cast<double>(b_[i + 1] - b_[i]);
        const double v = static_cast<double>(d_[i]) + slope * static_cast<double>(b - b_[i]);
        return static_cast<std::int64_t>(std::llround(v));
    }

    std::vector<std::int64_t> b_;
    std::vector<std::int64_t> d_;
    std::vector<std::int64_t> table_;  // table_[b] = d(b) for b in [0, b_.back()]
};

}  // namespace pard
