// pard/rules/duration_scale.hpp — d_k(b) corrected by the measured / profiled batch-duration ratio.
#pragma once

#include <cstdint>

#include "pard/snapshot.hpp"

namespace pard::rules {

// A duration scaled by a measured / profiled ratio, rounded to the nearest ns and at least 1 ns
// (exactly d at scale 1): the one place the hot path applies the online d(b) correction.
[[nodiscard]] inline std::int64_t scaled(std::int64_t d, double scale) noexcept {
    if (scale == 1.0) return d;
    const auto v = static_cast<std::int64_t>(static_cast<double>(d) * scale + 0.5);
    return v < 1 ? 1 : v;
}

// A stage's own measured / profiled ratio over the batches it has run, clipped to the published
// bounds; 1 (the profile) before its first batch. The executors of a pipeline share one machine, so
// until the planner pools every stage's ratio a stage's own is the best estimate it holds.
[[nodiscard]] inline double own_duration_scale(std::int64_t measured_ns, std::int64_t profiled_ns) noexcept {
    if (profiled_ns <= 0) return 1.0;
    const double s = static_cast<double>(measured_ns) / static_cast<double>(profiled_ns);
    return s < kDurationScaleMin ? kDurationScaleMin : (s > kDurationScaleMax ? kDurationScaleMax : s);
}

// The terms the hot path uses while the planner has measured nothing (published duration_scale 0):
// every term the prior computed from the profile, rescaled by the stage's own ratio s, so that a burst
// arriving before the first sync is judged by how fast the executors really run, not by the profile.
[[nodiscard]] inline PublishedTerms with_own_scale(PublishedTerms t, double s) noexcept {
    t.duration_scale = s;
    if (s != 1.0) {
        t.downstream_ns = scaled(t.downstream_ns, s);
        t.overload_downstream_ns = scaled(t.overload_downstream_ns, s);
        t.floor_downstream_ns = scaled(t.floor_downstream_ns, s);
        t.outrank_downstream_ns = scaled(t.outrank_downstream_ns, s);
        t.service_rate /= s;
        t.path_rate /= s;
    }
    return t;
}

}  // namespace pard::rules
