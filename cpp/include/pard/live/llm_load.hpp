// pard/live/llm_load.hpp — LlmLoads: the live runtime's token-based load terms of its LLM stages (DESIGN
// §3.8), the simulator's (pard/sim/llm_worker.hpp, LlmDriver::load_terms) on live arrivals. An LLM stage's
// load factor and service rate count work, not requests: mu = the work its arrivals brought in the last
// window / (window x workers), its rate = workers / mean work; a stage above an LLM stage takes the larger
// mu and the smaller path rate. Without them the planner would read an LLM stage at its decode step's
// batch (max_seqs requests a step), far above what it serves.
//
// Concurrency. note() runs on any thread (the router, a stripe locked) and takes only its stage's own
// short mutex, a leaf. The work of what was noted is priced by the stage's length model when the
// planner reads the terms (adjust(), the planner thread only), under the stage's batch-forming lock.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "pard/live/types.hpp"
#include "pard/llm/stage_join.hpp"
#include "pard/request.hpp"
#include "pard/sim/llm_worker.hpp"
#include "pard/stage_scheduler.hpp"

namespace pard::live {

class LlmLoads {
public:
    // `below[k]`: the stages below stage k (stages_below).
    LlmLoads(const std::vector<LiveStageSpec>& specs, const std::vector<std::vector<int>>& below) : specs_(specs) {
        for (std::size_t k = 0; k < specs.size(); ++k) {
            stages_.push_back(specs[k].sched->llm().cost() ? std::make_unique<Stage>() : nullptr);
        }
        for (std::size_t k = 0; k < specs.size(); ++k) {
            below_.emplace_back();
            for (int j : below[k]) {
                if (stages_[static_cast<std::size_t>(j)]) below_.back().push_back(j);
            }
        }
    }
    LlmLoads(const LlmLoads&) = delete;
    LlmLoads& operator=(const LlmLoads&) = delete;

    // Request r arrived at stage k (r.arrival_ns); nothing at a DNN stage. Any thread.
    void note(int k, const Request& r) {
        Stage* s = stages_[static_cast<std::size_t>(k)].get();
        if (s == nullptr) return;
        std::lock_guard<std::mutex> lock(s->mu);
        s->fresh.push_back(r);
    }

    // Stage k's published mu, service rate and path rate with the LLM stages' work terms, at now_ns, with
    // workers[j] workers at stage j. The planner thread only.
    void adjust(int k, const std::vector<int>& workers, std::int64_t now_ns, double& mu, double& service_rate,
                double& path_rate) {
        double m = 0.0, rate = 0.0;
        if (terms_of(k, workers, now_ns, m, rate)) {
            mu = m;
            service_rate = rate;
        }
        for (int j : below_[static_cast<std::size_t>(k)]) {
            if (terms_of(j, workers, now_ns, m, rate)) sim::LlmLoad::fold_below(m, rate, mu, path_rate);
        }
    }

private:
    struct Stage {
        std::mutex mu;
        std::vector<Request> fresh;  // noted since the last adjust (mu)
        sim::LlmLoad load;           // the window's (arrival, work) (the planner thread)
    };

    bool terms_of(int j, const std::vector<int>& workers, std::int64_t now_ns, double& mu, double& rate) {
        Stage* s = stages_[static_cast<std::size_t>(j)].get();
        if (s == nullptr) return false;
        std::vector<Request> fresh;
        {
            std::lock_guard<std::mutex> lock(s->mu);
            fresh.swap(s->fresh);
        }
        if (!fresh.empty()) {
            llm::LlmJoin<NoCancel>::locked(*specs_[static_cast<std::size_t>(j)].sched, [&](llm::LlmCost& cost) {
                for (const Request& r : fresh) s->load.add(r.arrival_ns, cost.work_s(r));
            });
        }
        s->load.trim(now_ns);
        const int w = workers[static_cast<std::size_t>(j)];
        specs_[static_cast<std::size_t>(j)].sched->llm().set_workers(w);  // the queue bound's drain rate
        return s->load.terms(w, w, mu, rate);
    }

    struct NoCancel {
        bool operator()(std::uint64_t) const { return false; }
    };

    const std::vector<LiveStageSpec>& specs_;
    std::vector<std::unique_ptr<Stage>> stages_;  // per stage; null at a DNN stage
    std::vector<std::vector<int>> below_;         // per stage, the LLM stages below it
};

}  // namespace pard::live
