// pard/stage_config.hpp — what a stage scheduler is built from: its configuration (validated once) and
// the strict weak order of its queue.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "pard/depq.hpp"
#include "pard/llm/stage_model.hpp"
#include "pard/policy.hpp"
#include "pard/profile.hpp"
#include "pard/request.hpp"
#include "pard/rules/coherent_rank.hpp"

namespace pard {

// The stage queue's strict weak order, chosen once by the policy: (arrival, id) or (deadline, id);
// or, under Policy::coherent_rank, the shared rank of the request's id (rules::coherent_rank; ties by id).
struct StageKeyLess {
    bool by_arrival = false;
    bool by_rank = false;
    static constexpr std::int64_t rank(std::uint64_t id) noexcept { return rules::coherent_rank(id); }
    bool operator()(const Request& a, const Request& b) const noexcept {
        if (by_rank) {
            const std::int64_t ra = rank(a.id), rb = rank(b.id);
            return ra < rb || (ra == rb && a.id < b.id);
        }
        return by_arrival ? ByArrival{}(a, b) : ByDeadline{}(a, b);
    }
    // The same order as a split key, so the DEPQ sifts 16-byte nodes (pard/depq.hpp).
    std::int64_t primary(const Request& r) const noexcept {
        return by_rank ? rank(r.id) : (by_arrival ? r.arrival_ns : r.deadline_ns);
    }
    static std::uint64_t tiebreak(const Request& r) noexcept { return r.id; }
};

struct NeverCancelled {
    constexpr bool operator()(std::uint64_t /*id*/) const noexcept { return false; }
};

struct StageConfig {
    int stage = 0;                 // the stage's index in its pipeline (reported with each drop)
    Profile profile;               // d_k(b)
    std::int64_t max_batch = 1;    // largest batch this stage forms
    Policy policy;                 // order x drop rule x parameters
    double budget_fraction = 1.0;  // clipper/nexus stage budget: slo_k = slo * budget_fraction
    std::size_t ring_capacity = 65536;  // ingress ring slots (a power of two)
    std::vector<double> tier_weights;   // tier t's weight (> 0); used by tiered policies; empty = one tier
    bool entry = true;                  // an entry stage (where max_queue_entry_only bounds apply)
    // An LLM stage (DESIGN §3.8): requests join a running batch at token boundaries (llm::LlmJoin); profile
    // is then its decode step's duration and max_batch its max_seqs.
    bool llm = false;
    llm::LlmStageSpec llm_spec;
};

// The one validation of a StageConfig; throws std::invalid_argument naming the field and value.
inline StageConfig validated_stage_config(StageConfig c) {
    if (c.stage < 0) throw std::invalid_argument("StageScheduler: stage=" + std::to_string(c.stage) + " must be >= 0");
    if (c.max_batch < 1 || c.max_batch > Profile::kMaxTable) {
        throw std::invalid_argument("StageScheduler: max_batch=" + std::to_string(c.max_batch) +
                                    " must be in [1, " + std::to_string(Profile::kMaxTable) + "]");
    }
    if (!(c.budget_fraction > 0.0 && c.budget_fraction <= 1.0)) {
        throw std::invalid_argument("StageScheduler: budget_fraction=" + std::to_string(c.budget_fraction) +
                                    " must be in (0, 1]");
    }
    if (c.ring_capacity < 2 || (c.ring_capacity & (c.ring_capacity - 1)) != 0) {
        throw std::invalid_argument("StageScheduler: ring_capacity=" + std::to_string(c.ring_capacity) +
                                    " must be a power of two >= 2");
    }
    c.policy.validate();
    if (c.llm) c.llm_spec.validate("StageScheduler: llm");
    if (c.policy.tiered) {
        for (std::size_t t = 0; t < c.tier_weights.size(); ++t) {
            if (!(std::isfinite(c.tier_weights[t]) && c.tier_weights[t] > 0.0)) {
                throw std::invalid_argument("StageScheduler: tier_weights[" + std::to_string(t) + "]=" +
                                            std::to_string(c.tier_weights[t]) + " must be finite and > 0");
            }
        }
    }
    return c;
}

}  // namespace pard
