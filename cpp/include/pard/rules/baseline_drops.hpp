// pard/rules/baseline_drops.hpp — the per-request drop verdicts of the reactive baselines (DESIGN §3.6).
#pragma once

#include <cstdint>

#include "pard/estimator.hpp"
#include "pard/policy.hpp"
#include "pard/request.hpp"

namespace pard::rules {

// The baselines drop by timeouts alone, judged at t_e, the batch's start: a worker collects its next
// batch as its current one starts, and a request still waiting when its timeout passes never runs in
// those systems. A Reason code, or -1 to keep. clipper: its stage share of the SLO or the deadline;
// dagor and ray-serve: the deadline; triton: the SLO counted from arrival at the stage; others keep.
[[nodiscard]] inline int baseline_verdict(DropRule rule, const Request& r, std::int64_t t_e_ns,
                                          double budget_fraction) noexcept {
    switch (rule) {
        case DropRule::kClipper: return clipper_verdict(r, t_e_ns, budget_fraction);
        case DropRule::kDagor:
        case DropRule::kRayServe: return expired(r, t_e_ns) ? static_cast<int>(Reason::kExpired) : -1;
        case DropRule::kTriton: return queue_timed_out(r, t_e_ns) ? static_cast<int>(Reason::kTimeout) : -1;
        default: return -1;
    }
}

}  // namespace pard::rules
