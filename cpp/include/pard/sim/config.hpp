// pard/sim/config.hpp — what a Simulator (pard/simulator.hpp) is built from and what it hands
// back: the stages and requests of a run and their checks, the statistics gathered per stage
// between two takes, and the log of every executed batch.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "pard/llm/stage_model.hpp"
#include "pard/policy.hpp"
#include "pard/profile.hpp"

namespace pard {

struct SimStageConfig {
    std::string name;
    Profile profile;
    std::int64_t max_batch = 1;
    int workers = 1;
    std::vector<int> successors;
    double budget_fraction = 1.0;
    // The simulated executor's speed against the profile: a batch runs exec_scale x d_k(b) x jitter,
    // while the stage scheduler still plans with d_k(b) (a profile measured on another machine). 1 = as profiled.
    double exec_scale = 1.0;
    // An LLM stage (DESIGN §3.8; pard/sim/llm_worker.hpp): profile and max_batch are then its decode
    // step's duration and max_seqs, as llm_spec holds them.
    bool llm = false;
    llm::LlmStageSpec llm_spec;
};

struct SimConfig {
    std::vector<SimStageConfig> stages;
    Policy policy;
    std::vector<std::int64_t> arrivals_ns;  // non-decreasing; request id = index
    std::vector<std::int64_t> slo_ns;       // per request, > 0
    std::vector<std::int32_t> tier;         // per request
    std::vector<double> tier_weights;       // tier t's weight (tiered policies); empty = one tier
    // Per request, for LLM stages (empty = none; required when a stage is an LLM stage): input tokens,
    // the true output length (where the engine's end-of-sequence falls; no rule reads it) and the
    // client's max_tokens hint (0 = none).
    std::vector<std::int32_t> in_tokens;
    std::vector<std::int32_t> out_tokens;
    std::vector<std::int32_t> max_tokens;
    double jitter_cv = 0.1;
    std::uint64_t seed = 0;
    std::int64_t cold_start_ns = 10'000'000'000;
    std::size_t ring_capacity = 1024;  // small on purpose: see pard/simulator.hpp
};

// Samples gathered per stage since the last take_stats() (ns).
struct StageStats {
    std::vector<std::int64_t> arrival;      // arrival times at the stage
    std::vector<std::int64_t> qdelay_t;     // when a request was taken into a batch
    std::vector<std::int64_t> qdelay;       // its queueing delay Q
    std::vector<std::int64_t> batch_start;  // one row per started batch
    std::vector<std::int64_t> batch_size;
    std::vector<std::int64_t> batch_wait;   // W = start - collection time
    std::vector<std::int64_t> batch_duration;
    std::int64_t dropped = 0;               // drops decided at this stage (not counting cancelled copies)
    std::int64_t late = 0;                  // requests that finished late at this (sink) stage
    void clear() {
        arrival.clear(); qdelay_t.clear(); qdelay.clear(); batch_start.clear(); batch_size.clear();
        batch_wait.clear(); batch_duration.clear(); dropped = 0; late = 0;
    }
};

// One row per executed batch, for the whole run.
struct BatchLog {
    std::vector<std::int32_t> stage;
    std::vector<std::int64_t> start;
    std::vector<std::int64_t> duration;
    std::vector<std::int64_t> size;
};

namespace sim {

// The largest execution-time CV: past it the lognormal factor's median (1 / sqrt(1 + cv^2)) is near 0
// and its mean of 1 is carried by ever rarer huge draws, so a run's batches take almost no time and
// the results stop depending on the CV in any useful way.
constexpr double kMaxJitterCv = 10.0;
// Arrival times and SLOs are capped at 1e9 s so that deadlines and estimates stay far from int64 overflow.
constexpr std::int64_t kMaxTimeNs = 1'000'000'000'000'000'000;

// Throws std::invalid_argument naming the first field of `cfg` that a run cannot take.
inline void validate(const SimConfig& cfg) {
    const std::size_t k = cfg.stages.size();
    if (k == 0) throw std::invalid_argument("Simulator: stages is empty");
    if (k > 65535) throw std::invalid_argument("Simulator: too many stages");
    for (std::size_t i = 0; i < k; ++i) {
        const SimStageConfig& s = cfg.stages[i];
        const std::string where = "Simulator: stages[" + std::to_string(i) + "]";
        if (s.workers < 1) throw std::invalid_argument(where + ".workers=" + std::to_string(s.workers) + " must be >= 1");
        for (int j : s.successors) {
            if (j < 0 || static_cast<std::size_t>(j) >= k || static_cast<std::size_t>(j) == i) {
                throw std::invalid_argument(where + ".successors contains " + std::to_string(j) +
                                            ", not another stage index in [0, " + std::to_string(k) + ")");
            }
        }
        std::vector<int> sorted = s.successors;
        std::sort(sorted.begin(), sorted.end());
        if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
            throw std::invalid_argument(where + ".successors lists a stage twice");
        }
    }
    // acyclic: Kahn's algorithm must consume every stage
    std::vector<int> indeg(k, 0);
    for (const auto& s : cfg.stages) for (int j : s.successors) ++indeg[static_cast<std::size_t>(j)];
    std::vector<std::size_t> ready;
    for (std::size_t i = 0; i < k; ++i) if (indeg[i] == 0) ready.push_back(i);
    std::size_t seen = 0;
    while (!ready.empty()) {
        const std::size_t i = ready.back();
        ready.pop_back();
        ++seen;
        for (int j : cfg.stages[i].successors) {
            if (--indeg[static_cast<std::size_t>(j)] == 0) ready.push_back(static_cast<std::size_t>(j));
        }
    }
    if (seen != k) throw std::invalid_argument("Simulator: the stages' successors form a cycle");
    const std::size_t n = cfg.arrivals_ns.size();
    if (cfg.slo_ns.size() != n) {
        throw std::invalid_argument("Simulator: slo_s has " + std::to_string(cfg.slo_ns.size()) +
                                    " entries but arrivals_s has " + std::to_string(n));
    }
    if (cfg.tier.size() != n) {
        throw std::invalid_argument("Simulator: tier has " + std::to_string(cfg.tier.size()) +
                                    " entries but arrivals_s has " + std::to_string(n));
    }
    for (std::size_t i = 0; i < n; ++i) {
        if (cfg.arrivals_ns[i] < 0 || (i > 0 && cfg.arrivals_ns[i] < cfg.arrivals_ns[i - 1])) {
            throw std::invalid_argument("Simulator: arrivals_s[" + std::to_string(i) + "]=" +
                                        std::to_string(static_cast<double>(cfg.arrivals_ns[i]) * 1e-9) +
                                        " must be >= 0 and not before arrivals_s[" + std::to_string(i ? i - 1 : 0) +
                                        "] (sort the arrivals)");
        }
        if (cfg.arrivals_ns[i] > kMaxTimeNs) {
            throw std::invalid_argument("Simulator: arrivals_s[" + std::to_string(i) + "]=" +
                                        std::to_string(static_cast<double>(cfg.arrivals_ns[i]) * 1e-9) +
                                        " exceeds 1e9 s");
        }
        if (cfg.slo_ns[i] <= 0 || cfg.slo_ns[i] > kMaxTimeNs) {
            throw std::invalid_argument("Simulator: slo_s[" + std::to_string(i) + "]=" +
                                        std::to_string(static_cast<double>(cfg.slo_ns[i]) * 1e-9) +
                                        " must be in (0, 1e9] s");
        }
    }
    bool any_llm = false;
    for (std::size_t i = 0; i < k; ++i) {
        if (!cfg.stages[i].llm) continue;
        any_llm = true;
        cfg.stages[i].llm_spec.validate("Simulator: stages[" + std::to_string(i) + "]");
    }
    const auto tokens = [n, any_llm](const std::vector<std::int32_t>& v, const char* field, bool required, std::int32_t low) {
        if (v.empty() && !(required && any_llm)) return;
        if (v.size() != n) {
            throw std::invalid_argument(std::string("Simulator: ") + field + " has " + std::to_string(v.size()) +
                                        " entries but arrivals_s has " + std::to_string(n) +
                                        (v.empty() ? " (an LLM stage needs every request's token counts)" : ""));
        }
        for (std::size_t i = 0; i < n; ++i) {
            if (v[i] < low) {
                throw std::invalid_argument(std::string("Simulator: ") + field + "[" + std::to_string(i) + "]=" +
                                            std::to_string(v[i]) + " must be >= " + std::to_string(low));
            }
        }
    };
    tokens(cfg.in_tokens, "in_tokens", true, 0);
    tokens(cfg.out_tokens, "out_tokens", true, 1);
    tokens(cfg.max_tokens, "max_tokens", false, 0);
    if (!std::isfinite(cfg.jitter_cv) || cfg.jitter_cv < 0.0 || cfg.jitter_cv > kMaxJitterCv) {
        throw std::invalid_argument("Simulator: jitter_cv=" + std::to_string(cfg.jitter_cv) + " must be in [0, 10]");
    }
    if (cfg.cold_start_ns < 0) {
        throw std::invalid_argument("Simulator: cold_start_s=" +
                                    std::to_string(static_cast<double>(cfg.cold_start_ns) * 1e-9) + " must be >= 0");
    }
}

}  // namespace sim
}  // namespace pard
