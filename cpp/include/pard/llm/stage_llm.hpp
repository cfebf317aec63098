// pard/llm/stage_llm.hpp — what a StageScheduler holds for LLM stages (DESIGN §3.8): at an LLM stage its
// cost model (pard/llm/stage_model.hpp) and the sequences running at its last step boundary; at any stage
// the LLM stages below it, whose per-request cost its pop rule adds to the published downstream term.
// The join at a step boundary is pard/llm/stage_join.hpp.
#pragma once

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

    // vllm at an LLM stage: whether an arrival that finds `waiting` queued is rejected (rules/vllm_cap.hpp),
    // the mean request time at the running means.
    [[nodiscard]] bool vllm_rejects(DropRule rule, const Request& r, std::size_t waiting) const {
        if (!cost_ || rule != DropRule::kVllm) return false;
        return rules::vllm_rejects(waiting, rules::vllm_queue_cap(cost_->spec().max_seqs, r.deadline_ns - r.send_ns,
                                                                   cost_->cost_ns(r, running())));
    }

private:
    std::unique_ptr<LlmCost> cost_;
    std::atomic<std::int64_t> running_{0};
    std::vector<const StageLlm*> below_;
};

}  // namespace pard::llm
