// pard/rules/tier_thresholds.hpp — the downstream term per service tier (tiered stages).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "pard/snapshot.hpp"

namespace pard::rules {

// Per tier: whether some other tier weighs less, so that this tier is served ahead of it at every
// stage below (empty for one tier). Only such a tier takes the outranking term below.
[[nodiscard]] inline std::vector<bool> outranking_tiers(const std::vector<double>& w) {
    std::vector<bool> out(w.size(), false);
    for (std::size_t k = 0; k < w.size(); ++k) {
        for (const double x : w) out[k] = out[k] || x < w[k];
    }
    return out;
}

// A tier served first at every stage below meets there its own tiers' queues and the running batch,
// not the lower tiers' backlog that the all-tier queueing delay and the busy term measure: it takes the
// published outrank term (Σd + Σ min(q_i, d_i / 2)), else the floor, where that is the smaller.
[[nodiscard]] constexpr std::int64_t tier_downstream_ns(const PublishedTerms& t, bool outranks) noexcept {
    if (!outranks) return t.downstream_ns;
    const std::int64_t own = t.outrank_downstream_ns > 0 ? t.outrank_downstream_ns : t.floor_downstream_ns;
    return own > 0 && own < t.downstream_ns ? own : t.downstream_ns;
}

}  // namespace pard::rules
