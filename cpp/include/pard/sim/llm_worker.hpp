// pard/sim/llm_worker.hpp — an LLM stage's workers in the simulator (DESIGN §3.8): iteration-level
// ("continuous") batching on the simulator's event queue, with the stage's own StageScheduler deciding
// who joins (pard/simulator.hpp drives it; the live runtime follows the same rule).
// Its load factor and service rate count work, not requests (load_terms).
//
// A worker runs decode steps back to back while it has running sequences. At each step boundary:
//   1. every running sequence emitted one token in the step that ended; one that has emitted its
//      out_tokens-th token (capped by its hint and max_output_tokens) leaves: its KV is freed, the
//      stage's length model observes it, and it goes to its successors or finishes;
//   2. a sequence whose request ended elsewhere (a cancelled DAG copy) stops; under a pard rule with
//      Policy::llm_stop a sequence that can no longer finish by its deadline stops too
//      (rules/llm_deadline.hpp), dropped here with reason `infeasible`, its KV freed, no more compute;
//   3. the stage's StageScheduler hands the joiners (llm::LlmJoin, pard/llm/stage_join.hpp): at most max_seqs - running, while their KV
//      reservations (prompt + largest answer) fit the worker's budget; no preemption;
//   4. the next step runs decode(n) for the n sequences running after the join, plus each joiner's
//      prefill, times the jitter factor (and exec_scale). Every running sequence, joiners included,
//      emits one token. Its compute is charged: each joiner its prefill, the decode part split equally.
// The stage's statistics get one batch row per step (size = running sequences, duration = the step's
// decode part, what the decode profile predicts), so the planner reads the stage like any other; the
// batch log holds the whole step.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "pard/compute_split.hpp"
#include "pard/outcome.hpp"
#include "pard/policy.hpp"
#include "pard/request.hpp"
#include "pard/rules/llm_deadline.hpp"
#include "pard/snapshot.hpp"
#include "pard/stage_scheduler.hpp"

namespace pard::sim {

using llm::LlmJoin;

// One running sequence.
struct LlmSeq {
    Request r;
    std::int32_t generated = 0;   // tokens emitted so far
    std::int32_t stop_at = 1;     // the token count at which it leaves (its true length, capped)
    std::int32_t predicted = 1;   // predicted length at its join (calibration)
    std::int64_t reserved = 0;    // KV tokens held
    std::int64_t prefill_ns = 0;  // its prefill, charged in the step it joins (0 after)
};

// A worker's running batch.
struct LlmRun {
    std::vector<LlmSeq> seqs;
    std::int64_t kv_used = 0;
    std::int64_t decode_ns = 0;  // the running step's drawn decode part (observe_batch)
};

// The work (pard/llm/stage_model.hpp's work(r), s) of the stage's arrivals in a sliding window: the
// token-based load factor and service rate the simulator publishes for an LLM stage.
struct LlmLoad {
    static constexpr std::int64_t kWindowNs = 5'000'000'000;  // the planner's default estimation window
    std::deque<std::pair<std::int64_t, double>> arrivals;
    double sum = 0.0;
    void add(std::int64_t t_ns, double work_s) {
        arrivals.emplace_back(t_ns, work_s);
        sum += work_s;
    }
    void trim(std::int64_t now_ns) {
        while (!arrivals.empty() && arrivals.front().first <= now_ns - kWindowNs) {
            sum -= arrivals.front().second;
            arrivals.pop_front();
        }
        if (arrivals.empty()) sum = 0.0;
    }
    // The stage's terms from the window: mu = its work / (window x serving workers), the service rate =
    // ordered workers / mean work (req/s). False with no arrival in the window.
    bool terms(int serving, int ordered, double& mu, double& rate) const {
        if (arrivals.empty()) return false;
        mu = sum / (std::max(1, serving) * static_cast<double>(kWindowNs) * 1e-9);
        rate = std::max(1, ordered) * static_cast<double>(arrivals.size()) / sum;
        return true;
    }
    // A stage above an LLM stage with terms (m, r): the larger load factor, the smaller path rate.
    static void fold_below(double m, double r, double& mu, double& path_rate) {
        mu = std::max(mu, m);
        if (path_rate > 0.0) path_rate = std::min(path_rate, r);
    }
};

// The step logic over a Simulator's state (Sim is pard::Simulator, which befriends this driver).
template <class Sim>
struct LlmDriver {
    // A step of worker wi of stage k ended: step 1, then the boundary.
    static void step_end(Sim& s, std::size_t k, std::size_t wi) {
        auto& st = s.stages_[k];
        LlmRun& run = st.workers[wi].llm;
        st.sched->observe_batch(static_cast<std::int64_t>(run.seqs.size()), run.decode_ns);
        auto* cost = st.sched->llm().cost();
        std::size_t keep = 0;
        for (std::size_t i = 0; i < run.seqs.size(); ++i) {
            LlmSeq& q = run.seqs[i];
            q.prefill_ns = 0;
            if (++q.generated < q.stop_at) {
                run.seqs[keep++] = q;
                continue;
            }
            run.kv_used -= q.reserved;
            cost->observe(q.r, q.generated);
            cost->record_calibration(q.predicted, q.generated);
            if (s.out_.pending(q.r.id)) s.forward(k, q.r);
        }
        run.seqs.resize(keep);
        boundary(s, k, wi);
    }

    // Steps 2-4 at now for worker wi of stage k (idle, or whose step just ended).
    static void boundary(Sim& s, std::size_t k, std::size_t wi) {
        auto& st = s.stages_[k];
        auto& w = st.workers[wi];
        LlmRun& run = w.llm;
        auto* cost = st.sched->llm().cost();
        const auto& sp = cost->spec();
        const std::int64_t now = s.now_;
        stop_sequences(s, k, run);
        if (!w.retiring) {
            const auto slots = sp.max_seqs - static_cast<std::int64_t>(run.seqs.size());
            if (slots > 0) {
                const llm::Elsewhere other = s.cfg_.policy.drop == DropRule::kPard && s.cfg_.policy.llm_tokens
                                                 ? elsewhere(s, k, wi) : llm::Elsewhere{};
                auto cancelled = [&s](std::uint64_t id) { return !s.out_.pending(id); };
                LlmJoin<decltype(cancelled)>::form(*st.sched, now, static_cast<std::int64_t>(run.seqs.size()), slots,
                                                   sp.kv_tokens - run.kv_used, st.scratch, cancelled, other);
                s.handle_drops(k, st.scratch.drops);
                for (const Request& r : st.scratch.batch) {
                    LlmSeq q;
                    q.r = r;
                    q.stop_at = std::min(s.cfg_.out_tokens[r.id], sp.cap(r));
                    q.predicted = cost->predicted_len(r);
                    q.reserved = sp.reservation(r);
                    q.prefill_ns = sp.prefill_ns(r.in_tokens);
                    run.kv_used += q.reserved;
                    run.seqs.push_back(q);
                    st.stats.qdelay_t.push_back(now);
                    st.stats.qdelay.push_back(now - r.arrival_ns);
                }
            }
        }
        if (run.seqs.empty()) {
            if (w.retiring) {
                w.retiring = false;
                st.set_state(w, Sim::WState::kRetired);
            } else {
                st.set_state(w, Sim::WState::kIdle);
            }
            return;
        }
        start_step(s, k, wi);
    }

    // Each stage's scheduler learns the LLM stages below it (their per-request cost joins its pop rule).
    static void link(Sim& s, const std::vector<std::vector<int>>& below) {
        for (std::size_t i = 0; i < s.stages_.size(); ++i) {
            std::vector<const llm::StageLlm*> llm;
            s.llm_below_.emplace_back();
            for (int j : below[i]) {
                if (!s.stages_[static_cast<std::size_t>(j)].llm) continue;
                llm.push_back(&s.stages_[static_cast<std::size_t>(j)].sched->llm());
                s.llm_below_.back().push_back(static_cast<std::size_t>(j));
            }
            s.stages_[i].sched->llm().set_below(std::move(llm));
        }
    }

    // A kick at an LLM stage: every idle worker reaches a step boundary.
    static void kick(Sim& s, std::size_t k) {
        for (std::size_t wi = 0; wi < s.stages_[k].workers.size(); ++wi) {
            if (s.stages_[k].workers[wi].st == Sim::WState::kIdle) boundary(s, k, wi);
        }
    }

    // Stage k's terms, and those of the stages above an LLM stage, count load in work (LlmLoad): at an LLM
    // stage mu = the window's work / (window x serving workers) and the service rate = ordered workers / mean
    // work, the cold ones included: a queue built while they start drains at their rate once they serve, well
    // within an LLM request's seconds-long budget; a stage above takes the larger mu and the smaller path rate.
    static void load_terms(Sim& s, std::size_t k, PublishedTerms& t) {
        const auto terms_of = [&s](std::size_t j, double& mu, double& rate) {
            auto& l = s.stages_[j];
            l.llm_load.trim(s.now_);
            int ordered = 0;
            for (const auto& wk : l.workers) ordered += wk.counts() ? 1 : 0;
            l.sched->llm().set_workers(ordered);  // the queue bound's drain rate (rules/llm_queue_bound.hpp)
            return l.llm_load.terms(s.workers(j), ordered, mu, rate);
        };
        double mu = 0.0, rate = 0.0;
        if (s.stages_[k].llm && terms_of(k, mu, rate)) {
            t.mu = mu;
            t.service_rate = rate;
        }
        if (k >= s.llm_below_.size()) return;
        for (std::size_t j : s.llm_below_[k]) {
            if (terms_of(j, mu, rate)) LlmLoad::fold_below(mu, rate, t.mu, t.path_rate);
        }
    }

private:
    // What pard's joins at worker wi may read of the stage's other workers (llm::Elsewhere); only a
    // token-aware policy (Policy::llm_tokens) reads it, so the paper's method keeps its own rule.
    static llm::Elsewhere elsewhere(Sim& s, std::size_t k, std::size_t wi) {
        auto& st = s.stages_[k];
        std::int64_t least = -1, ready = -1;
        for (std::size_t j = 0; j < st.workers.size(); ++j) {
            const auto& o = st.workers[j];
            if (j == wi || !o.counts()) continue;
            if (o.st == Sim::WState::kCold) {
                ready = ready < 0 || o.ready_at < ready ? o.ready_at : ready;
            } else {
                const auto n = static_cast<std::int64_t>(o.llm.seqs.size());
                least = least < 0 || n < least ? n : least;
            }
        }
        return llm::Elsewhere{least, ready};
    }

    // Step 2: cancelled copies, and (Policy::llm_stop) the sequences that can no longer finish in time, stop.
    // The estimate is at the decode step alone, decode(n): a sequence stops only once even an uncontended
    // pace would miss its deadline.
    static void stop_sequences(Sim& s, std::size_t k, LlmRun& run) {
        auto& st = s.stages_[k];
        const auto* cost = st.sched->llm().cost();
        const bool judge = s.cfg_.policy.llm_stop && s.cfg_.policy.drop == DropRule::kPard;
        const std::int64_t down = judge ? st.sched->effective_terms().downstream_ns : 0;
        const std::int64_t step = cost->spec().step_ns(static_cast<std::int64_t>(run.seqs.size()));
        std::size_t keep = 0;
        for (std::size_t i = 0; i < run.seqs.size(); ++i) {
            const LlmSeq& q = run.seqs[i];
            bool stop = !s.out_.pending(q.r.id);
            if (!stop && judge) {
                const std::int32_t left = cost->predicted_len(q.r, q.generated) - q.generated;
                if (rules::llm_decode_stops(q.r, s.now_, left, step, down)) {
                    ++st.stats.dropped;
                    s.out_.terminate(q.r, Outcome::kDropped, static_cast<int>(k), Reason::kInfeasible, s.now_);
                    stop = true;
                }
            }
            if (stop) {
                run.kv_used -= q.reserved;
            } else {
                run.seqs[keep++] = q;
            }
        }
        run.seqs.resize(keep);
    }

    // Step 4.
    static void start_step(Sim& s, std::size_t k, std::size_t wi) {
        auto& st = s.stages_[k];
        auto& w = st.workers[wi];
        LlmRun& run = w.llm;
        const auto n = static_cast<std::int64_t>(run.seqs.size());
        const std::int64_t decode = st.sched->llm().cost()->spec().step_ns(n);
        std::int64_t prefill = 0;
        for (const LlmSeq& q : run.seqs) prefill += q.prefill_ns;
        const double factor = st.exec_scale * s.jitter_();
        auto dur = static_cast<std::int64_t>(std::llround(static_cast<double>(decode + prefill) * factor));
        if (dur < 1) dur = 1;
        // the drawn step split in proportion: each joiner's prefill, then the decode part shared equally
        std::int64_t prefill_drawn = 0;
        for (const LlmSeq& q : run.seqs) {
            if (q.prefill_ns == 0) continue;
            const auto p = std::min(dur - prefill_drawn,
                                    static_cast<std::int64_t>(std::llround(static_cast<double>(q.prefill_ns) * factor)));
            s.out_.charge(q.r.id, k, p);
            prefill_drawn += p;
        }
        run.decode_ns = dur - prefill_drawn;
        st.sched->llm().cost()->observe_step(s.now_, prefill_drawn, s.workers(k));
        const BatchShares shares(run.decode_ns, run.seqs.size());
        for (std::size_t i = 0; i < run.seqs.size(); ++i) s.out_.charge(run.seqs[i].r.id, k, shares(i));
        st.set_state(w, Sim::WState::kBusy);
        w.run_ns = dur;
        s.events_.push(s.now_ + dur, Sim::kPrioBatchEnd, Sim::kBatchEnd, static_cast<std::uint32_t>(k),
                       static_cast<std::uint32_t>(wi));
        st.stats.batch_start.push_back(s.now_);
        st.stats.batch_size.push_back(n);
        st.stats.batch_wait.push_back(0);
        st.stats.batch_duration.push_back(run.decode_ns);
        s.log_.stage.push_back(static_cast<std::int32_t>(k));
        s.log_.start.push_back(s.now_);
        s.log_.duration.push_back(dur);
        s.log_.size.push_back(n);
    }
};

}  // namespace pard::sim
