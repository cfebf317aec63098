// pard/llm/stage_llm.hpp — what a StageScheduler holds for LLM stages (DESIGN §3.8): at an LLM stage its
// cost model (pard/llm/stage_model.hpp) and the sequences running at its last step boundary; at any stage
// the LLM stages below it, whose per-request cost its pop rule adds to the published downstream term.
// The join at a step boundary is pard/llm/stage_join.hpp.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "pard/llm/stage_model.hpp"
#include "pard/policy.hpp"
#include "pard/request.hpp"
#include "pard/rules/vllm_cap.hpp"

namespace pard::llm {

template <class IsCancelled>
struct LlmJoin;  // pard/llm/stage_join.hpp

// Where else at an LLM stage a queued request could join, as the worker forming a join sees the stage's other
// workers: the fewest sequences running on another serving worker (-1: none), and the earliest time a starting
// worker serves (-1: none). The simulator knows both; the live runtime the first (its workers publish their
// running counts at their step boundaries, LlmSteps) and starts no workers.
struct Elsewhere {
    std::int64_t least_running = -1;
    std::int64_t ready_ns = -1;
};

class StageLlm {
public:
    void build(const LlmStageSpec& spec, const Policy& policy, int tiers) {
        cost_ = std::make_unique<LlmCost>(spec, policy.llm_tokens, policy.llm_quantile, tiers);
    }
    // The cost model (nullptr at a DNN stage). Mutated only under the stage's batch-forming lock, or by the
    // single-threaded simulator's engine (it observes finished sequences).
    [[nodiscard]] LlmCost* cost() noexcept { return cost_.get(); }
    [[nodiscard]] const LlmCost* cost() const noexcept { return cost_.get(); }

    // Sequences running on the worker at the last step boundary (what a stage above prices a request's decode
    // steps at; at least 1). Any thread; relaxed.
    [[nodiscard]] std::int64_t running() const noexcept {
        const std::int64_t n = running_.load(std::memory_order_relaxed);
        return n > 0 ? n : 1;
    }
    void set_running(std::int64_t n) noexcept { running_.store(n, std::memory_order_relaxed); }

    // The workers that drain this stage's queue: the ordered workers its load terms count, set where they are
    // published (the simulator's load_terms, the live LlmLoads); the queue bound's rate
    // (rules/llm_queue_bound.hpp). Any thread; relaxed.
    void set_workers(int w) noexcept { workers_.store(w < 1 ? 1 : w, std::memory_order_relaxed); }
    [[nodiscard]] std::int64_t workers() const noexcept { return workers_.load(std::memory_order_relaxed); }
    // The earliest finish (ns from now_ns) of r at this stage elsewhere than on the worker forming a join
    // (Elsewhere: the fewest sequences running on another serving worker, a starting one's first serving
    // time): on the least busy other worker now, or on a starting one once it serves; -1 without either.
    [[nodiscard]] std::int64_t elsewhere_ns(const Request& r, std::int64_t now_ns, const Elsewhere& e) const {
        std::int64_t best = -1;
        if (e.least_running >= 0) best = cost_->cost_ns(r, e.least_running + 1);
        if (e.ready_ns >= 0) {
            const std::int64_t c = std::max<std::int64_t>(0, e.ready_ns - now_ns) + cost_->cost_ns(r, 1);
            best = best < 0 || c < best ? c : best;
        }
        return best;
    }

    // The LLM stages below this one. Set once, before any batch forms; they must outlive this one.
    void set_below(std::vector<const StageLlm*> below) { below_ = std::move(below); }

    // The largest cost (ns) of r at the LLM stages below (0 without any), at their running counts.
    [[nodiscard]] std::int64_t below_ns(const Request& r) const {
        std::int64_t best = 0;
        for (const StageLlm* s : below_) {
            const std::int64_t c = s->cost_->cost_ns(r, s->running());
            best = c > best ? c : best;
        }
        return best;
    }

    // vllm at an LLM stage: whether an arrival that finds `waiting` requests with waiting_tokens prompt tokens
    // queued is rejected by either cap (rules/vllm_cap.hpp), the mean request time at the running means.
    [[nodiscard]] bool vllm_rejects(DropRule rule, const Request& r, std::size_t waiting, std::int64_t waiting_tokens) const {
        if (!cost_ || rule != DropRule::kVllm) return false;
        const std::int64_t cap = rules::vllm_queue_cap(cost_->spec().max_seqs, r.deadline_ns - r.send_ns,
                                                       cost_->cost_ns(r, running()));
        return rules::vllm_rejects(waiting, cap) ||
               rules::vllm_tokens_reject(waiting_tokens, r.in_tokens, rules::vllm_token_cap(cap, cost_->mean_in()));
    }
    // The prompt tokens queued in `heap` when vllm's token cap applies here (else 0, unread).
    template <class Heap>
    [[nodiscard]] std::int64_t vllm_waiting_tokens(DropRule rule, const Heap& heap) const {
        std::int64_t n = 0;
        if (cost_ && rule == DropRule::kVllm) heap.for_each([&n](const Request& r) { n += r.in_tokens; });
        return n;
    }

private:
    std::unique_ptr<LlmCost> cost_;
    std::atomic<std::int64_t> running_{0};
    std::atomic<std::int64_t> workers_{1};
    std::vector<const StageLlm*> below_;
};

}  // namespace pard::llm
