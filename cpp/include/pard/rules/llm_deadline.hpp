// pard/rules/llm_deadline.hpp — pard's estimate of Eq. 3b with an LLM stage's per-request cost (DESIGN §3.8).
//
// At an LLM stage a request's own duration replaces d_k(b): cost(r, n) = prefill + q x step(n)
// (pard/llm/stage_model.hpp). At its admission it is dropped iff t_e + cost(r, n) + downstream > deadline;
// during decode, with g tokens out and q(g) > g predicted, it is stopped iff
// now + (q(g) - g) x step(n) + downstream > deadline: it can no longer finish in time, so it stops
// spending. At a stage above, the same cost is added to the published downstream term.
#pragma once

#include <cstdint>

#include "pard/request.hpp"

namespace pard::rules {

// Admission at the LLM stage (or a stage above, with t_e + d_k(b) + downstream as base_ns): drop iff the
// deadline is below base + the request's LLM cost. Equal keeps.
[[nodiscard]] constexpr bool llm_drops(const Request& r, std::int64_t base_ns, std::int64_t llm_cost_ns) noexcept {
    return r.deadline_ns < base_ns + llm_cost_ns;
}

// Decode-time: stop a sequence with `remaining` predicted steps of step_ns each left, judged at now_ns.
[[nodiscard]] constexpr bool llm_decode_stops(const Request& r, std::int64_t now_ns, std::int64_t remaining,
                                              std::int64_t step_ns, std::int64_t downstream_ns) noexcept {
    return r.deadline_ns < now_ns + remaining * step_ns + downstream_ns;
}

}  // namespace pard::rules
