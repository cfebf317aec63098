// pard/simulator.hpp — Simulator: a deterministic discrete-event simulation of a pipeline of stages
// on a virtual clock, driving the same StageScheduler objects the live runtime uses (DESIGN §3.1,
// §5a). Pure C++: the driver (pard.sim) advances it one sync interval at a time (run_until), reads the
// statistics gathered meanwhile, and publishes new terms; there is no Python call per request.
//
// Model.
//   * Stages form a DAG (a chain is a special case). Entry stages (no predecessors) receive each
//     request at its arrival time. A finished request goes to every successor (fan-out); a join stage
//     (several predecessors) receives the request once all its predecessors have delivered it. The
//     request finishes when every sink stage has finished it; on_time iff that time <= deadline.
//   * W workers per stage, with the batching semantics of §3.1: when a worker starts a batch it
//     immediately collects its next batch (form_batch with t_e = now + d_k(b) of the running batch,
//     the profile's nominal duration); if nothing was collected it collects again when the batch
//     ends (t_e = now). An idle worker collects and starts as soon as requests arrive: arrivals
//     schedule a "kick" at the same instant that runs after every same-time arrival and batch end,
//     so requests that arrive together (one upstream batch) are batched together.
//   * An arrival that finds every worker of its stage busy (pard only) runs the stage's purge
//     (StageScheduler::purge) for t_e = the earliest time a worker can start a new batch, from
//     nominal durations as the pre-collection's t_e: a request already infeasible then is dropped
//     at its arrival, not when the next batch forms (Triton #7512). A cold worker's t_e is its
//     ready time; a retiring one starts no new batch.
//   * Execution time of a batch = d_k(b) x a lognormal factor with mean 1 and CV jitter_cv, drawn
//     from one seeded generator per simulator (pard/sim/jitter.hpp): same seed, same run, on every
//     platform. cv = 0 draws nothing. A batch's compute is split equally among its requests.
//   * A drop (or rejection) sets the request's terminal state once. Copies of it on other branches
//     are cancelled: a copy still queued is discarded when popped (reason `cancelled`, no compute);
//     a copy inside an already collected or running batch runs anyway (its compute is wasted) and
//     is not forwarded. Terminal states are never overwritten, so every request counts once.
//   * Autoscaling: set_workers(stage, n) sets a target. Growing first revokes pending retirements,
//     then adds workers that serve after cold_start. Shrinking removes still-cold workers first,
//     then idle ones, then marks busy ones to retire once their collected work is done (highest
//     index first, deterministic). At least one worker.
//   * Requests enter a stage through StageScheduler::submit_local: the ingress buffer of a
//     single-threaded owner, with the ring's capacity and order but none of the lock-free ring's
//     atomic operations (the ring itself stays empty). Overflow never rejects in the simulator: a
//     submit that finds the buffer full drains it into the queue first (the single-threaded
//     simulator has no back-pressure). So the ring can be small (default 1024 slots, vs 65536 for a
//     live StageScheduler): a big ring costs its allocation and per-slot initialisation at every
//     construction, which dominates short runs. The
//     ingress capacity changes no decision while the published terms stay the same: the heap's
//     order does not depend on when a request entered it, and the purge and pop rules run only in
//     form_batch and purge. Only admission (the admit share, Dagor's overload check) happens at
//     drain time, so with a small ring (or, for pard, a purge on a busy arrival) it can
//     happen earlier: such a drop is then stamped earlier; across a publish it can see the old
//     terms instead of the new ones; and in a DAG it can drop a copy whose sibling is dropped
//     later (the request is then attributed to this stage instead of being a cancelled copy).
//
//   * An LLM stage (SimStageConfig::llm) batches at token boundaries: its workers step through
//     pard/sim/llm_worker.hpp, the same event queue and StageScheduler (llm::LlmJoin) deciding who joins.
//     Its load factor and service rate are published in work, not requests: the planner's terms for
//     it, and the mu of every stage above it, take the work its arrivals bring (sim::LlmDriver::load_terms).
//
// Event order at equal times: batch ends (priority 0), worker ready (1), entry arrivals (2), kicks
// (3); then insertion order.
//
// Parts: the configuration and its checks, the statistics and the batch log (pard/sim/config.hpp),
// each stage's run-time state (pard/sim/stage_runtime.hpp) with its free-worker index
// (pard/sim/free_index.hpp), the per-request accounting (pard/sim/outcomes.hpp) and the jitter
// (pard/sim/jitter.hpp); this class runs the event loop over them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "pard/compute_split.hpp"
#include "pard/event_queue.hpp"
#include "pard/outcome.hpp"
#include "pard/policy.hpp"
#include "pard/profile.hpp"
#include "pard/request.hpp"
#include "pard/sim/config.hpp"
#include "pard/sim/jitter.hpp"
#include "pard/sim/outcomes.hpp"
#include "pard/sim/stage_runtime.hpp"
#include "pard/stage_scheduler.hpp"

namespace pard {

class Simulator {
public:
    static constexpr double kMaxJitterCv = sim::kMaxJitterCv;
    explicit Simulator(SimConfig cfg) : cfg_(checked(std::move(cfg))), jitter_(cfg_.seed, cfg_.jitter_cv) { build(); }
    Simulator(const Simulator&) = delete;
    Simulator& operator=(const Simulator&) = delete;

    // Processes every event with time <= t_ns, then sets the clock to t_ns (if later). Returns true
    // while events or arrivals remain.
    bool run_until(std::int64_t t_ns) {
        const std::size_t n = cfg_.arrivals_ns.size();
        for (;;) {
            const bool have_ev = !events_.empty();
            const bool have_arr = next_arrival_ < n;
            if (!have_ev && !have_arr) break;
            bool take_arrival = false;
            if (have_arr) {
                const std::int64_t ta = cfg_.arrivals_ns[next_arrival_];
                if (!have_ev) {
                    take_arrival = true;
                } else {
                    const Event& e = events_.top();
                    take_arrival = ta < e.t_ns || (ta == e.t_ns && kPrioArrival < e.prio);
                }
            }
            if (take_arrival) {
                const std::int64_t ta = cfg_.arrivals_ns[next_arrival_];
                if (ta > t_ns) break;
                now_ = ta;
                on_arrival(next_arrival_++);
            } else {
                const Event e = events_.top();
                if (e.t_ns > t_ns) break;
                events_.pop();
                now_ = e.t_ns;
                dispatch(e);
            }
        }
        if (t_ns > now_) now_ = t_ns;
        return !events_.empty() || next_arrival_ < n;
    }

    [[nodiscard]] std::int64_t now_ns() const noexcept { return now_; }
    [[nodiscard]] std::size_t num_stages() const noexcept { return stages_.size(); }
    [[nodiscard]] std::size_t num_requests() const noexcept { return cfg_.arrivals_ns.size(); }

    void publish(std::size_t stage, PublishedTerms t) {
        Stage& s = at(stage);
        Llm::load_terms(*this, stage, t);
        s.sched->publish(t);
        s.free.mark_dirty();  // d_k(b) may have changed (the terms carry the duration scale)
    }
    [[nodiscard]] Order current_order(std::size_t stage) const { return at(stage).sched->current_order(); }

    // Target worker count of a stage (>= 1), effective per the header comment.
    void set_workers(std::size_t stage, int n) {
        if (n < 1) throw std::invalid_argument("set_workers: n=" + std::to_string(n) + " must be >= 1");
        Stage& s = at(stage);
        int current = 0;
        for (const Worker& w : s.workers) current += w.counts() ? 1 : 0;
        const auto touch_i = [this, &s](std::size_t i) { touch(s, i); };
        current = s.revoke_retirements(current, n, touch_i);  // grow: revoke retirements, then cold-start new workers
        while (current < n) {
            Worker w;
            w.st = WState::kCold;
            w.ready_at = now_ + cfg_.cold_start_ns;
            w.running.reserve(static_cast<std::size_t>(s.max_batch));
            w.next.reserve(static_cast<std::size_t>(s.max_batch));
            s.workers.push_back(std::move(w));
            touch(s, s.workers.size() - 1);
            events_.push(now_ + cfg_.cold_start_ns, kPrioReady, kWorkerReady, static_cast<std::uint32_t>(stage),
                         static_cast<std::uint32_t>(s.workers.size() - 1));
            ++current;
        }
        s.shrink(current, n, touch_i);
    }

    // Workers serving now: idle or busy and not marked to retire (cold ones excluded).
    [[nodiscard]] int workers(std::size_t stage) const {
        int k = 0;
        for (const Worker& w : at(stage).workers) {
            k += (w.st == WState::kIdle || (w.st == WState::kBusy && !w.retiring)) ? 1 : 0;
        }
        return k;
    }

    [[nodiscard]] std::size_t queued(std::size_t stage) const { return at(stage).sched->queued(); }

    // Hands over the samples gathered since the last call (and starts new ones).
    void take_stats(std::size_t stage, StageStats& out) {
        Stage& s = at(stage);
        std::swap(out, s.stats);
        s.stats.clear();
    }

    // take_stats() of every stage at once into out[k] (resized to num_stages(); buffers are swapped, so
    // their capacity is reused from one sync to the next).
    void take_all_stats(std::vector<StageStats>& out) {
        out.resize(stages_.size());
        for (std::size_t k = 0; k < stages_.size(); ++k) {
            std::swap(out[k], stages_[k].stats);
            stages_[k].stats.clear();
        }
    }

    // Per-request results (index = request id).
    [[nodiscard]] const std::vector<Outcome>& states() const noexcept { return out_.states(); }
    [[nodiscard]] const std::vector<std::int64_t>& finish_ns() const noexcept { return out_.finish_ns(); }
    [[nodiscard]] const std::vector<std::int32_t>& drop_stage() const noexcept { return out_.drop_stage(); }
    [[nodiscard]] const std::vector<std::int32_t>& drop_reason() const noexcept { return out_.drop_reason(); }
    [[nodiscard]] const std::vector<double>& compute_ns() const noexcept { return out_.compute_ns(); }
    // Where the compute went, per stage (pard/compute_split.hpp).
    [[nodiscard]] const ComputeSplit& compute_split() const noexcept { return out_.compute_split(); }
    [[nodiscard]] const BatchLog& batches() const noexcept { return log_; }
    // An LLM stage's cost model (its length model's calibration; nullptr for a DNN stage).
    [[nodiscard]] const llm::LlmCost* llm_cost(std::size_t stage) const { return at(stage).sched->llm().cost(); }

private:
    template <class> friend struct sim::LlmDriver;
    using Llm = sim::LlmDriver<Simulator>;
    using WState = sim::WState;
    using Worker = sim::SimWorker;
    using Stage = sim::SimStage;

    static constexpr std::uint8_t kPrioBatchEnd = 0;
    static constexpr std::uint8_t kPrioReady = 1;
    static constexpr std::uint8_t kPrioArrival = 2;
    static constexpr std::uint8_t kPrioKick = 3;
    static constexpr std::uint8_t kBatchEnd = 0;
    static constexpr std::uint8_t kWorkerReady = 1;
    static constexpr std::uint8_t kKick = 2;

    static SimConfig checked(SimConfig cfg) {
        sim::validate(cfg);
        return cfg;
    }

    Stage& at(std::size_t stage) {
        if (stage >= stages_.size()) {
            throw std::out_of_range("stage=" + std::to_string(stage) + " is not in [0, " +
                                    std::to_string(stages_.size()) + ")");
        }
        return stages_[stage];
    }
    const Stage& at(std::size_t stage) const { return const_cast<Simulator*>(this)->at(stage); }

    // Each scheduler learns the stages below it (StageScheduler::set_below; Policy::overload_below).
    void link_below() {
        std::vector<std::vector<int>> succ;
        for (const auto& c : cfg_.stages) succ.push_back(c.successors);
        const auto below = stages_below(succ);
        for (std::size_t i = 0; i < stages_.size(); ++i) {
            std::vector<const StageScheduler*> v;
            for (int j : below[i]) v.push_back(stages_[static_cast<std::size_t>(j)].sched.get());
            stages_[i].sched->set_below(std::move(v));
        }
        Llm::link(*this, below);
        const auto parallel = parallel_branches(succ);  // Policy::coherent_rank's stages
        for (std::size_t i = 0; i < stages_.size(); ++i) stages_[i].sched->set_parallel(parallel[i] != 0);
    }

    void build() {
        const std::size_t k = cfg_.stages.size();
        stages_.resize(k);
        int joins = 0;
        std::vector<int> preds(k, 0);
        for (const auto& c : cfg_.stages) for (int j : c.successors) ++preds[static_cast<std::size_t>(j)];
        for (std::size_t i = 0; i < k; ++i) {
            Stage& s = stages_[i];
            sim::init_stage(s, cfg_, i, preds[i] == 0);
            if (s.sink) ++n_sinks_;
        }
        for (const auto& c : cfg_.stages) for (int j : c.successors) ++stages_[static_cast<std::size_t>(j)].n_pred;
        link_below();
        for (std::size_t i = 0; i < k; ++i) {
            if (stages_[i].n_pred > 255) {
                throw std::invalid_argument("Simulator: stages[" + std::to_string(i) + "] joins more than 255 branches");
            }
        }
        for (auto& s : stages_) {
            if (s.n_pred == 0) entries_.push_back(static_cast<std::size_t>(&s - stages_.data()));
            if (s.n_pred > 1) s.join_index = joins++;
        }
        out_.reset(cfg_.arrivals_ns.size(), n_sinks_, static_cast<std::size_t>(joins), k);
    }

    void handle_drops(std::size_t stage, const std::vector<Drop>& drops) {
        Stage& s = stages_[stage];
        for (const Drop& d : drops) {
            if (d.reason == Reason::kCancelled) continue;  // a discarded copy; the request is already terminal
            ++s.stats.dropped;
            out_.terminate(d.request, d.reason == Reason::kRejected ? Outcome::kRejected : Outcome::kDropped,
                           static_cast<int>(stage), d.reason, now_);
        }
    }

    void on_arrival(std::size_t i) {
        const std::int64_t t = cfg_.arrivals_ns[i];
        Request r{static_cast<std::uint64_t>(i), t, t + cfg_.slo_ns[i], t, cfg_.tier[i], 0};
        if (!cfg_.in_tokens.empty()) r.in_tokens = cfg_.in_tokens[i];
        if (!cfg_.max_tokens.empty()) r.max_tokens = cfg_.max_tokens[i];
        for (std::size_t e : entries_) deliver(e, r);
    }

    void deliver(std::size_t stage, Request r) {
        Stage& s = stages_[stage];
        r.arrival_ns = now_;
        if (!s.sched->submit_local(r)) {
            s.scratch.drops.clear();
            s.sched->drain(s.scratch.drops, [this](std::uint64_t id) { return !out_.pending(id); });
            handle_drops(stage, s.scratch.drops);
            const bool ok = s.sched->submit_local(r);
            (void)ok;  // the ring was just emptied by the only thread that submits to it
        }
        s.stats.arrival.push_back(now_);
        if (s.llm) s.llm_load.add(now_, s.sched->llm().cost()->work_s(r));
        if (!s.kick_pending && s.idle > 0) {
            s.kick_pending = true;
            events_.push(now_, kPrioKick, kKick, static_cast<std::uint32_t>(stage), 0);
        } else if (s.idle == 0 && !s.kick_pending && cfg_.policy.drop == DropRule::kPard && !s.llm) {
            purge_busy(stage);
        }
    }

    // Every worker busy: purge for the earliest time one of them can start a new batch (nominal
    // durations; see the header comment).
    void purge_busy(std::size_t stage) {
        Stage& s = stages_[stage];
        const std::int64_t t_e =
            s.free.earliest(now_, [&s](std::int64_t b) { return s.sched->expected_duration_ns(b); });
        if (t_e == std::numeric_limits<std::int64_t>::max()) return;
        s.scratch.drops.clear();
        s.sched->purge(now_, t_e, s.scratch.drops, [this](std::uint64_t id) { return !out_.pending(id); });
        handle_drops(stage, s.scratch.drops);
    }

    // Records worker wi's current key in its stage's free index (pard only: no other policy reads it).
    // Called after every change of a worker's state, retiring flag, pre-collected batch or times.
    void touch(Stage& s, std::size_t wi) {
        if (cfg_.policy.drop != DropRule::kPard) return;
        const auto [cls, t] = s.workers[wi].free_key();
        s.free.touch(wi, cls, t, s.workers.size(), s.max_batch);
    }

    void dispatch(const Event& e) {
        switch (e.kind) {
            case kBatchEnd: on_batch_end(e.stage, e.worker); break;
            case kWorkerReady: on_ready(e.stage, e.worker); break;
            case kKick: on_kick(e.stage); break;
            default: break;
        }
    }

    // Forms a batch into w.next (collected at now_, expected to start at t_e). True if non-empty.
    bool collect(std::size_t stage, Worker& w, std::int64_t t_e) {
        Stage& s = stages_[stage];
        s.sched->form_batch(now_, t_e, s.scratch, [this](std::uint64_t id) { return !out_.pending(id); });
        handle_drops(stage, s.scratch.drops);
        if (s.scratch.batch.empty()) return false;
        w.next.swap(s.scratch.batch);
        w.has_next = true;
        w.next_collected = now_;
        touch(s, static_cast<std::size_t>(&w - s.workers.data()));
        for (const Request& r : w.next) {
            s.stats.qdelay_t.push_back(now_);
            s.stats.qdelay.push_back(now_ - r.arrival_ns);
        }
        return true;
    }

    // Starts w.next now; then collects the following batch (t_e = now + d_k(b)) unless the worker is
    // retiring. While a kick is pending (idle workers and same-instant arrivals), the pre-collection
    // waits for that kick, so idle workers take the new requests first (see on_kick).
    void start_next(std::size_t stage, std::size_t wi, bool precollect) {
        Stage& s = stages_[stage];
        Worker& w = s.workers[wi];
        w.running.swap(w.next);
        w.has_next = false;
        s.set_state(w, WState::kBusy);
        const auto size = static_cast<std::int64_t>(w.running.size());
        const std::int64_t nominal = s.profile.duration_ns(size);
        auto dur = static_cast<std::int64_t>(std::llround(static_cast<double>(nominal) * s.exec_scale * jitter_()));
        if (dur < 1) dur = 1;
        w.run_ns = dur;
        events_.push(now_ + dur, kPrioBatchEnd, kBatchEnd, static_cast<std::uint32_t>(stage),
                     static_cast<std::uint32_t>(wi));
        out_.charge_batch(w.running, stage, dur);
        s.stats.batch_start.push_back(now_);
        s.stats.batch_size.push_back(size);
        s.stats.batch_wait.push_back(now_ - w.next_collected);
        s.stats.batch_duration.push_back(dur);
        log_.stage.push_back(static_cast<std::int32_t>(stage));
        log_.start.push_back(now_);
        log_.duration.push_back(dur);
        log_.size.push_back(size);
        w.nominal_end = now_ + s.sched->expected_duration_ns(size);  // the scheduler's belief, not the draw
        touch(s, wi);
        if (w.retiring) return;
        if (precollect && !s.kick_pending) {
            collect(stage, w, w.nominal_end);
        } else {
            w.wants_next = true;
        }
    }

    // Request r (still pending) is done at stage k: it finishes at a sink and goes to every successor.
    void forward(std::size_t k, const Request& r) {
        Stage& s = stages_[k];
        if (s.sink && out_.finish_at_sink(r, now_) == Outcome::kLate) ++s.stats.late;
        for (int j : s.succ) {
            const Stage& nxt = stages_[static_cast<std::size_t>(j)];
            if (nxt.join_index >= 0 && !out_.join_arrive(r.id, static_cast<std::size_t>(nxt.join_index), nxt.n_pred)) {
                continue;
            }
            deliver(static_cast<std::size_t>(j), r);
        }
    }

    void on_batch_end(std::size_t stage, std::size_t wi) {
        Stage& s = stages_[stage];
        if (s.llm) return Llm::step_end(*this, stage, wi);
        {
            Worker& w = s.workers[wi];
            s.sched->observe_batch(static_cast<std::int64_t>(w.running.size()), w.run_ns);
            for (const Request& r : w.running) {
                if (out_.pending(r.id)) forward(stage, r);  // else cancelled meanwhile: wasted, not forwarded
            }
            w.running.clear();
        }
        Worker& w = s.workers[wi];  // deliver() may not grow s.workers, but keep the reference fresh
        w.wants_next = false;
        if (w.has_next) {
            start_next(stage, wi, true);
            return;
        }
        if (w.retiring) {
            s.set_state(w, WState::kRetired);
            w.retiring = false;
            touch(s, wi);
            return;
        }
        if (collect(stage, w, now_)) {
            start_next(stage, wi, true);
        } else {
            s.set_state(w, WState::kIdle);
            touch(s, wi);
        }
    }

    void on_ready(std::size_t stage, std::size_t wi) {
        Stage& s = stages_[stage];
        Worker& w = s.workers[wi];
        if (w.st != WState::kCold) return;  // removed before it came up
        s.set_state(w, WState::kIdle);
        touch(s, wi);
        if (!s.kick_pending) {
            s.kick_pending = true;
            events_.push(now_, kPrioKick, kKick, static_cast<std::uint32_t>(stage), 0);
        }
    }

    // Idle workers first collect and start (in index order, W = 0); only then do the workers that
    // started a batch at this instant pre-collect their next batch, so one worker never takes two
    // batches while another idles.
    void on_kick(std::size_t stage) {
        Stage& s = stages_[stage];
        s.kick_pending = false;
        if (s.llm) return Llm::kick(*this, stage);
        for (std::size_t wi = 0; wi < s.workers.size(); ++wi) {
            if (s.workers[wi].st != WState::kIdle) continue;
            if (!collect(stage, s.workers[wi], now_)) break;  // queue empty
            start_next(stage, wi, false);
        }
        for (Worker& w : s.workers) {
            if (!w.wants_next) continue;
            w.wants_next = false;
            if (w.st == WState::kBusy && !w.retiring && !w.has_next) collect(stage, w, w.nominal_end);
        }
    }

    SimConfig cfg_;
    std::vector<Stage> stages_;
    std::vector<std::size_t> entries_;
    std::vector<std::vector<std::size_t>> llm_below_;  // per stage, the LLM stages below it
    std::size_t n_sinks_ = 0;
    EventQueue events_;
    std::size_t next_arrival_ = 0;
    std::int64_t now_ = 0;
    sim::LognormalJitter jitter_;
    sim::SimOutcomes out_;
    BatchLog log_;
};

}  // namespace pard
