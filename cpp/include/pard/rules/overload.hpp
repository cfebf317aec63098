// pard/rules/overload.hpp — the hot-path overload test and its shed count (Policy::reactive, step 2b).
#pragma once

#include <cmath>
#include <cstdint>

#include "pard/snapshot.hpp"

namespace pard::rules {

// n queued requests need about n / R to drain; when that exceeds the largest slack queued, low budget
// first would spend the stage on requests that leave it with no slack, so the stage pops HBF at once
// instead of a sync later. A lone request never holds it: nothing is ahead of it.
[[nodiscard]] constexpr bool overload_holds(double n, double service_rate, double slack_max_s) noexcept {
    return n > 1.0 && !(n <= service_rate * slack_max_s);
}

// How many queued requests can start within s seconds at `rate` requests/s in batches of max_batch:
// the batch starting now holds a full batch and another starts every max_batch / rate, so the count
// is batch-granular; the fluid count rate * s would shed up to a batch that still finishes in time.
[[nodiscard]] inline double startable(std::int64_t max_batch, double rate, double s) noexcept {
    const auto b = static_cast<double>(max_batch);
    return b * (std::floor(rate * s / b) + 1.0);
}

// A shed is irreversible, so it waits for the planner's pooled, measured duration ratio (published
// duration_scale > 0): until then the service rate would rest on the profile or on a stage's first
// batches alone. The order switch and the purge still act meanwhile.
[[nodiscard]] constexpr bool may_shed(const PublishedTerms& published) noexcept {
    return published.duration_scale != 0.0;
}

}  // namespace pard::rules
