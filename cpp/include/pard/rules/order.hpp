// pard/rules/order.hpp — the adaptive order of DESIGN §3.3, as the planner's publish steps it.
#pragma once

#include "pard/policy.hpp"

namespace pard::rules {

// In a burst (mu > 1 + eps) the requests that can still make it through every stage go first (HBF);
// in steady load (mu < 1 - eps) the tightest budgets do (LBF). Inside the band the order is kept, so
// input noise of the size the burstiness band measures does not flip it at every sync.
[[nodiscard]] constexpr Order adaptive_order(Order current, double mu, double eps) noexcept {
    if (mu > 1.0 + eps) return Order::kHbf;
    if (mu < 1.0 - eps) return Order::kLbf;
    return current;
}

}  // namespace pard::rules
