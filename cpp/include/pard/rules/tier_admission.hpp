// pard/rules/tier_admission.hpp — a published admitted share taken from the lowest-weight tiers first.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "pard/estimator.hpp"

namespace pard::rules {

// When the planner publishes an admitted share f < 1 to a tiered stage, the refused 1 - f of the input
// is taken from the lowest-weight tiers first, by their recent arrival shares (counts halved every 4096
// arrivals), so a throttle sheds the least valuable work; each tier's share is then admitted evenly.
class TierAdmission {
public:
    explicit TierAdmission(std::size_t tiers) : throttle_(tiers), seen_(tiers, 0.0), fraction_(tiers, 1.0) {}

    [[nodiscard]] std::size_t index(std::int32_t tier) const noexcept {
        return (tier < 0 || static_cast<std::size_t>(tier) >= seen_.size()) ? 0 : static_cast<std::size_t>(tier);
    }

    // Counts one arrival of `tier`; while the shares are still forming, re-derives them at once.
    void note(std::int32_t tier, double f, const std::vector<double>& weights) noexcept {
        seen_[index(tier)] += 1.0;
        if (++total_ >= 4096.0) {
            for (double& c : seen_) c *= 0.5;
            total_ *= 0.5;
        }
        if (total_ < 64.0) update(f, weights);
    }

    // Whether the next arrival of `tier` is admitted under the current per-tier shares.
    [[nodiscard]] bool admit(std::int32_t tier) noexcept {
        const std::size_t k = index(tier);
        return throttle_[k].admit(fraction_[k]);
    }

    // Per-tier admitted shares that refuse 1 - f of the recent input, lowest weight first.
    void update(double f, const std::vector<double>& w) noexcept {
        double total = 0.0;
        for (double c : seen_) total += c;
        if (order_.size() != seen_.size()) {  // lowest weight first (ties: higher index first)
            order_.resize(seen_.size());
            for (std::size_t i = 0; i < order_.size(); ++i) order_[i] = i;
            std::stable_sort(order_.begin(), order_.end(), [&w](std::size_t a, std::size_t b) { return w[a] > w[b]; });
            std::reverse(order_.begin(), order_.end());
        }
        if (total <= 0.0) {
            for (double& x : fraction_) x = f;
            return;
        }
        double shed = (1.0 - f) * total;
        for (std::size_t t : order_) {
            const double c = seen_[t];
            if (shed >= c) {
                fraction_[t] = 0.0;
                shed -= c;
            } else {
                fraction_[t] = c > 0.0 ? 1.0 - shed / c : 1.0;
                shed = 0.0;
            }
        }
    }

    [[nodiscard]] const std::vector<double>& fractions() const noexcept { return fraction_; }

private:
    std::vector<AdmissionThrottle> throttle_;  // one per tier
    std::vector<double> seen_;                 // decaying arrival counts per tier
    std::vector<double> fraction_;             // admitted share per tier
    std::vector<std::size_t> order_;           // tiers, lowest weight first
    double total_ = 0.0;
};

}  // namespace pard::rules
