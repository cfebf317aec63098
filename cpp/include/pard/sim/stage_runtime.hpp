// pard/sim/stage_runtime.hpp — the simulator's run-time state of a stage (pard/simulator.hpp): its
// StageScheduler, its workers and their batches, the statistics gathered since the last take, and
// the index of when each worker can start a new batch (pard/sim/free_index.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "pard/profile.hpp"
#include "pard/request.hpp"
#include "pard/sim/config.hpp"
#include "pard/sim/free_index.hpp"
#include "pard/sim/llm_worker.hpp"
#include "pard/stage_scheduler.hpp"

namespace pard::sim {

enum class WState : std::uint8_t { kCold, kIdle, kBusy, kRetired };

struct SimWorker {
    WState st = WState::kIdle;
    bool retiring = false;
    std::vector<Request> running;
    std::vector<Request> next;
    bool has_next = false;
    bool wants_next = false;          // pre-collection deferred to the pending kick (Simulator::on_kick)
    std::int64_t ready_at = 0;        // when a cold worker comes up
    std::int64_t next_collected = 0;
    std::int64_t nominal_end = 0;     // start + expected d_k(b) of the running batch: t_e of its pre-collection
    std::int64_t run_ns = 0;          // the running batch's drawn duration (observe_batch at its end)
    LlmRun llm;                       // an LLM stage's running sequences (pard/sim/llm_worker.hpp)
    // Whether it counts towards the stage's worker target.
    [[nodiscard]] bool counts() const noexcept {
        return st == WState::kCold || st == WState::kIdle || (st == WState::kBusy && !retiring);
    }
    // Its class in the free index and its time there; class -1: it starts no new batch.
    [[nodiscard]] std::pair<int, std::int64_t> free_key() const noexcept {
        if (st == WState::kCold) return {0, ready_at};
        if (st == WState::kBusy && !retiring) return {has_next ? 1 + static_cast<int>(next.size()) : 1, nominal_end};
        return {-1, 0};
    }
};

struct SimStage {
    std::unique_ptr<StageScheduler> sched;
    Profile profile;
    double exec_scale = 1.0;
    std::int64_t max_batch = 1;
    std::vector<int> succ;
    int n_pred = 0;
    int join_index = -1;  // the request's join column when n_pred > 1
    bool sink = false;
    bool llm = false;     // an LLM stage: its workers step through pard/sim/llm_worker.hpp
    LlmLoad llm_load;     // its recent arrivals' work (the token-based load factor)
    bool kick_pending = false;
    int idle = 0;  // workers in state kIdle
    std::vector<SimWorker> workers;
    BatchResult scratch;
    StageStats stats;
    FreeWorkerIndex free;  // purge_busy's index (pard only)

    // Growing from `current` counted workers towards n: busy workers marked to retire stay instead, in index
    // order; touch(i) after each change. Returns the new count.
    template <class Touch>
    int revoke_retirements(int current, int n, Touch&& touch) {
        for (std::size_t i = 0; i < workers.size() && current < n; ++i) {
            SimWorker& w = workers[i];
            if (w.st == WState::kBusy && w.retiring) {
                w.retiring = false;
                touch(i);
                ++current;
            }
        }
        return current;
    }

    // Shrinking from `current` counted workers to n: cold first, then idle, then busy ones (they retire after
    // their collected work), highest index first; touch(i) after each change.
    template <class Touch>
    void shrink(int current, int n, Touch&& touch) {
        for (WState kind : {WState::kCold, WState::kIdle, WState::kBusy}) {
            for (std::size_t i = workers.size(); i-- > 0 && current > n;) {
                SimWorker& w = workers[i];
                if (w.st != kind || !w.counts()) continue;
                if (kind == WState::kBusy) {
                    w.retiring = true;
                } else {
                    set_state(w, WState::kRetired);
                }
                touch(i);
                --current;
            }
        }
    }

    // Moves worker w to state `to`, keeping the idle count.
    void set_state(SimWorker& w, WState to) noexcept {
        if (w.st == WState::kIdle) --idle;
        if (to == WState::kIdle) ++idle;
        w.st = to;
    }
};

// Builds stage `index` of `cfg` into `s` (its StageScheduler validates max_batch and
// budget_fraction); `entry`: the stage has no predecessor.
inline void init_stage(SimStage& s, const SimConfig& cfg, std::size_t index, bool entry) {
    const SimStageConfig& c = cfg.stages[index];
    StageConfig sc;
    sc.stage = static_cast<int>(index);
    sc.profile = c.profile;
    sc.max_batch = c.max_batch;
    sc.policy = cfg.policy;
    sc.budget_fraction = c.budget_fraction;
    sc.ring_capacity = cfg.ring_capacity;
    sc.tier_weights = cfg.tier_weights;
    sc.entry = entry;
    sc.llm = c.llm;
    sc.llm_spec = c.llm_spec;
    s.llm = c.llm;
    s.sched = std::make_unique<StageScheduler>(sc);
    s.profile = c.profile;
    s.exec_scale = c.exec_scale;
    s.max_batch = c.max_batch;
    s.succ = c.successors;
    s.sink = c.successors.empty();
    s.scratch.batch.reserve(static_cast<std::size_t>(c.max_batch));
    s.workers.resize(static_cast<std::size_t>(c.workers));
    s.idle = c.workers;
    for (SimWorker& w : s.workers) {
        w.running.reserve(static_cast<std::size_t>(c.max_batch));
        w.next.reserve(static_cast<std::size_t>(c.max_batch));
    }
}

}  // namespace pard::sim
