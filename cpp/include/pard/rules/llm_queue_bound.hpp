// pard/rules/llm_queue_bound.hpp — an LLM stage's queue bound in tokens of work (DESIGN §3.8; issue 38 item 4).
//
// A DNN stage's queue drains at a rate in requests; an LLM stage's requests differ a hundredfold in cost (a
// prompt of 8 000 tokens and an answer of 1 000 against 50 and 20), so a count of queued requests at a mean
// cost misreads a burst of long prompts as a short queue. Here the queue is its predicted work: each
// request's work(r) = prefill(in) + q decode steps at a full batch's per-sequence share (pard/llm/
// stage_model.hpp: the same prefill and the same predicted length q the drop rule prices the request at),
// drained by the stage's workers (its ordered workers, as its service rate counts them). The hot-path
// overload test (Policy::reactive) reads it: the queue is over its bound when its drain time exceeds the
// largest slack queued; the stage then pops HBF at once, and sheds from the low-budget end each request that,
// served after the rest of the queue, would still miss its deadline. (What a stage above reads of this queue,
// the live lag of rules/queue_lag.hpp, stays a count at the window's mean work: measured, the queue's own
// mean there admitted more than the LLM served, since what a request finds includes what arrives meanwhile.)
#pragma once

#include <cstddef>
#include <cstdint>

#include "pard/request.hpp"

namespace pard::rules {

// The time (ns) `workers` workers need to serve queued_work_ns of work.
[[nodiscard]] constexpr std::int64_t llm_drain_ns(std::int64_t queued_work_ns, std::int64_t workers) noexcept {
    return queued_work_ns / (workers < 1 ? 1 : workers);
}

// The queue of n requests is over its bound: it takes longer to drain than the most slack any of them has
// (the latest deadline less now and the terms below). A lone request never is: nothing is ahead of it.
[[nodiscard]] constexpr bool llm_queue_over(std::size_t n, std::int64_t drain_ns, std::int64_t slack_max_ns) noexcept {
    return n > 1 && drain_ns > slack_max_ns;
}

// The request served last (HBF's low end) starts once the rest of the queue has drained (rest_drain_ns from
// now_ns), then costs cost_ns here and downstream_ns below: true when that misses its deadline.
[[nodiscard]] constexpr bool llm_last_misses(const Request& r, std::int64_t now_ns, std::int64_t rest_drain_ns,
                                             std::int64_t cost_ns, std::int64_t downstream_ns) noexcept {
    return r.deadline_ns < now_ns + rest_drain_ns + cost_ns + downstream_ns;
}

}  // namespace pard::rules
