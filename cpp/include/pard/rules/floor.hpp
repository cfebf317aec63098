// pard/rules/floor.hpp — the floor Σq + Σd when the busy forecast refutes itself (downstream="busy").
#pragma once

#include <cstdint>
#include <vector>

#include "pard/snapshot.hpp"

namespace pard::rules {

// Whether a published floor below the busy term exists to fall back on (0: the planner publishes none).
[[nodiscard]] constexpr bool floor_applies(const PublishedTerms& t) noexcept {
    return t.floor_downstream_ns > 0 && t.floor_downstream_ns < t.downstream_ns;
}

// A forecast of busy stages below refutes itself when it leaves no queued request feasible (the
// threshold passes the latest deadline queued) while nothing below backs it: this stage would drop its
// whole queue, the stages below would go idle, and they were busy only with what this stage sent them.
[[nodiscard]] constexpr bool refutes_itself(std::int64_t threshold_ns, std::int64_t latest_deadline_ns) noexcept {
    return threshold_ns > latest_deadline_ns;
}

// Nothing below backs a busy forecast: no stage below holds a request, signals overload, or runs
// batches past arrive_ns (when a request leaving this stage gets there). A stage fed at its own pace
// by this one is busy, yet done when the next request arrives. Stage: overloaded_now, queued, busy_until_ns.
template <class Stage>
[[nodiscard]] bool below_idle(const std::vector<const Stage*>& below, std::int64_t arrive_ns) noexcept {
    for (const Stage* s : below) {
        if (s->overloaded_now() || s->queued() > 0 || s->busy_until_ns() > arrive_ns) return false;
    }
    return true;
}

}  // namespace pard::rules
