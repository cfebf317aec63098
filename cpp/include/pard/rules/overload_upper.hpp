// pard/rules/overload_upper.hpp — the pop rule's raised downstream term while overloaded (overload_upper,
// overload_below).
#pragma once

#include <cstdint>
#include <vector>

#include "pard/policy.hpp"
#include "pard/snapshot.hpp"

namespace pard::rules {

// An overloaded stage forwards at its full rate, so the stages below are about to be busy whatever
// utilisation the planner measured over its window: its pop rule then budgets pard-upper's Σq + 2Σd
// (overload_downstream) where that exceeds the published term. The purge keeps the published term.
[[nodiscard]] constexpr std::int64_t pop_downstream_ns(const PublishedTerms& t, bool raised) noexcept {
    return raised && t.overload_downstream_ns > t.downstream_ns ? t.overload_downstream_ns : t.downstream_ns;
}

// Whether the raise would change the term at all; when it does, the stage also checks that the raised
// term leaves some queued request feasible (a raise that drops the whole queue starves the stages
// below, so the premise that they are about to be busy never comes true).
[[nodiscard]] constexpr bool raises(const PublishedTerms& t) noexcept {
    return t.overload_downstream_ns > t.downstream_ns;
}

// A burst piling up at a stage below reaches the planner's averages a sync late; a stage below whose
// own overload test held at its last batch (and that still holds a request) says so at once, read per
// batch from the stages of the same process. Stage: any type with overloaded_now().
template <class Stage>
[[nodiscard]] bool below_signals(BelowSignal how, const std::vector<const Stage*>& below) noexcept {
    if (how == BelowSignal::kNone) return false;
    for (const Stage* s : below) {
        if (s->overloaded_now()) return true;
    }
    return false;
}

}  // namespace pard::rules
