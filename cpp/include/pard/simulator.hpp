// pard/simulator.hpp — Simulator: a deterministic discrete-event simulation of a pipeline of stages
// on a virtual clock, driving the same StageScheduler objects the live runtime uses (DESIGN §3.1,
// §5a). Pure C++: the Python planner advances it one sync interval at a time (run_until), reads the
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
//   * Execution time of a batch = d_k(b) x a lognormal factor with mean 1 and CV jitter_cv
//     (sigma^2 = ln(1 + cv^2), mu = -sigma^2 / 2), drawn from one std::mt19937_64 per simulator,
//     seeded by `seed`, with our own Box-Muller transform (the standard distributions are not
//     specified bit-for-bit across libraries): same seed, same run, on every platform. cv = 0 draws
//     nothing. A batch's compute is split equally among its requests.
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
//     construction (about 6 ms for five stages of 65536 slots), which dominates short runs. The
//     ingress capacity changes no decision while the published terms stay the same: the heap's
//     order does not depend on when a request entered it, and the purge and pop rules run only in
//     form_batch and purge. Only admission (the admit share, Dagor's overload check) happens at
//     drain time, so with a small ring (or, for pard, a purge on a busy arrival) it can
//     happen earlier: such a drop is then stamped earlier; across a publish it can see the old
//     terms instead of the new ones; and in a DAG it can drop a copy whose sibling is dropped
//     later (the request is then attributed to this stage instead of being a cancelled copy).
//
// Event order at equal times: batch ends (priority 0), worker ready (1), entry arrivals (2), kicks
// (3); then insertion order.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "pard/event_queue.hpp"
#include "pard/outcome.hpp"
#include "pard/policy.hpp"
#include "pard/profile.hpp"
#include "pard/request.hpp"
#include "pard/stage_scheduler.hpp"

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
};

struct SimConfig {
    std::vector<SimStageConfig> stages;
    Policy policy;
    std::vector<std::int64_t> arrivals_ns;  // non-decreasing; request id = index
    std::vector<std::int64_t> slo_ns;       // per request, > 0
    std::vector<std::int32_t> tier;         // per request
    std::vector<double> tier_weights;       // tier t's weight (tiered policies); empty = one tier
    double jitter_cv = 0.1;
    std::uint64_t seed = 0;
    std::int64_t cold_start_ns = 10'000'000'000;
    std::size_t ring_capacity = 1024;  // see the header comment: small on purpose
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

class Simulator {
public:
    // The largest execution-time CV: past it the lognormal factor's median (1 / sqrt(1 + cv^2)) is near 0
    // and its mean of 1 is carried by ever rarer huge draws, so a run's batches take almost no time and
    // the results stop depending on the CV in any useful way (jitter_cv 1e10 ran as jitter_cv 0).
    static constexpr double kMaxJitterCv = 10.0;
    explicit Simulator(SimConfig cfg) : cfg_(std::move(cfg)), rng_(cfg_.seed) {
        validate();
        build();
    }
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

    void publish(std::size_t stage, const PublishedTerms& t) {
        StageRt& s = at(stage);
        s.sched->publish(t);
        s.free_dirty = true;  // d_k(b) may have changed (the terms carry the duration scale)
    }
    [[nodiscard]] Order current_order(std::size_t stage) const { return at(stage).sched->current_order(); }

    // Target worker count of a stage (>= 1), effective per the header comment.
    void set_workers(std::size_t stage, int n) {
        if (n < 1) throw std::invalid_argument("set_workers: n=" + std::to_string(n) + " must be >= 1");
        StageRt& s = at(stage);
        int current = 0;
        for (const Worker& w : s.workers) current += w.counts() ? 1 : 0;
        // grow: revoke retirements, then cold-start new workers
        for (std::size_t i = 0; i < s.workers.size() && current < n; ++i) {
            Worker& w = s.workers[i];
            if (w.st == WState::kBusy && w.retiring) {
                w.retiring = false;
                touch(s, i);
                ++current;
            }
        }
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
        // shrink: cold first, then idle, then busy (retire after their collected work), highest index first
        for (WState kind : {WState::kCold, WState::kIdle, WState::kBusy}) {
            for (std::size_t i = s.workers.size(); i-- > 0 && current > n;) {
                Worker& w = s.workers[i];
                if (w.st != kind || !w.counts()) continue;
                if (kind == WState::kBusy) {
                    w.retiring = true;
                } else {
                    set_state(s, w, WState::kRetired);
                }
                touch(s, i);
                --current;
            }
        }
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
        StageRt& s = at(stage);
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
    [[nodiscard]] const std::vector<Outcome>& states() const noexcept { return state_; }
    [[nodiscard]] const std::vector<std::int64_t>& finish_ns() const noexcept { return finish_; }
    [[nodiscard]] const std::vector<std::int32_t>& drop_stage() const noexcept { return drop_stage_; }
    [[nodiscard]] const std::vector<std::int32_t>& drop_reason() const noexcept { return reason_; }
    [[nodiscard]] const std::vector<double>& compute_ns() const noexcept { return compute_; }
    [[nodiscard]] const BatchLog& batches() const noexcept { return log_; }

private:
    enum class WState : std::uint8_t { kCold, kIdle, kBusy, kRetired };
    struct FreeEntry {
        std::int64_t t;
        std::uint32_t worker;
    };
    struct FreeKey {
        std::int64_t t = 0;
        int cls = -1;
    };
    // Min-heap order on t (ties in any order: only the smallest t is read).
    struct FreeAfter {
        bool operator()(const FreeEntry& a, const FreeEntry& b) const noexcept { return a.t > b.t; }
    };
    struct Worker {
        WState st = WState::kIdle;
        bool retiring = false;
        std::vector<Request> running;
        std::vector<Request> next;
        bool has_next = false;
        bool wants_next = false;          // pre-collection deferred to the pending kick (see on_kick)
        std::int64_t ready_at = 0;        // when a cold worker comes up
        std::int64_t next_collected = 0;
        std::int64_t nominal_end = 0;     // start + expected d_k(b) of the running batch: t_e of its pre-collection
        std::int64_t run_ns = 0;          // the running batch's drawn duration (observe_batch at its end)
        [[nodiscard]] bool counts() const noexcept {
            return st == WState::kCold || st == WState::kIdle || (st == WState::kBusy && !retiring);
        }
    };
    struct StageRt {
        std::unique_ptr<StageScheduler> sched;
        Profile profile;
        double exec_scale = 1.0;
        std::int64_t max_batch = 1;
        std::vector<int> succ;
        int n_pred = 0;
        int join_index = -1;  // column in join_count_ when n_pred > 1
        bool sink = false;
        bool kick_pending = false;
        int idle = 0;  // workers in state kIdle
        std::vector<Worker> workers;
        BatchResult scratch;
        StageStats stats;
        // purge_busy's index of when each worker can start a new batch, one lazy min-heap of
        // (time, worker) per class: [0] cold workers (time = ready_at), [1 + b] busy non-retiring
        // workers with b requests pre-collected (time = nominal_end; b = 0: none). A worker's free
        // time is max(now, nominal_end) + d_k(b), monotone in nominal_end within a class, so the
        // earliest one is the min over classes of each class's smallest time -- the same t_e as a
        // scan of every worker, in O(max_batch) instead of O(workers) per busy arrival. An entry is
        // live iff it matches the worker's current class and time (checked on the worker itself),
        // so a state change only needs a push of the new key (touch); stale entries are popped
        // when they surface or swept out by compaction.
        std::vector<std::vector<FreeEntry>> free_heaps;
        std::vector<std::size_t> free_classes;  // the classes whose heap is non-empty, in any order
        std::size_t free_entries = 0;           // entries over all free_heaps (live + stale)
        std::vector<FreeKey> free_keys;         // each worker's current key (class -1: none), kept by touch
        // earliest_free's last answer, valid while the clock and every key stay the same (the arrivals
        // of one upstream batch reach a stage at one instant) and nothing is published meanwhile.
        std::int64_t free_cached = 0;
        std::int64_t free_cached_at = -1;
        bool free_dirty = true;
    };

    // Arrival times and SLOs are capped at 1e9 s so that deadlines and estimates stay far from int64 overflow.
    static constexpr std::int64_t kMaxTimeNs = 1'000'000'000'000'000'000;
    static constexpr std::uint8_t kPrioBatchEnd = 0;
    static constexpr std::uint8_t kPrioReady = 1;
    static constexpr std::uint8_t kPrioArrival = 2;
    static constexpr std::uint8_t kPrioKick = 3;
    static constexpr std::uint8_t kBatchEnd = 0;
    static constexpr std::uint8_t kWorkerReady = 1;
    static constexpr std::uint8_t kKick = 2;

    StageRt& at(std::size_t stage) {
        if (stage >= stages_.size()) {
            throw std::out_of_range("stage=" + std::to_string(stage) + " is not in [0, " +
                                    std::to_string(stages_.size()) + ")");
        }
        return stages_[stage];
    }
    const StageRt& at(std::size_t stage) const { return const_cast<Simulator*>(this)->at(stage); }

    void validate() const {
        const std::size_t k = cfg_.stages.size();
        if (k == 0) throw std::invalid_argument("Simulator: stages is empty");
        if (k > 65535) throw std::invalid_argument("Simulator: too many stages");
        for (std::size_t i = 0; i < k; ++i) {
            const SimStageConfig& s = cfg_.stages[i];
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
        for (const auto& s : cfg_.stages) for (int j : s.successors) ++indeg[static_cast<std::size_t>(j)];
        std::vector<std::size_t> ready;
        for (std::size_t i = 0; i < k; ++i) if (indeg[i] == 0) ready.push_back(i);
        std::size_t seen = 0;
        while (!ready.empty()) {
            const std::size_t i = ready.back();
            ready.pop_back();
            ++seen;
            for (int j : cfg_.stages[i].successors) {
                if (--indeg[static_cast<std::size_t>(j)] == 0) ready.push_back(static_cast<std::size_t>(j));
            }
        }
        if (seen != k) throw std::invalid_argument("Simulator: the stages' successors form a cycle");
        const std::size_t n = cfg_.arrivals_ns.size();
        if (cfg_.slo_ns.size() != n) {
            throw std::invalid_argument("Simulator: slo_s has " + std::to_string(cfg_.slo_ns.size()) +
                                        " entries but arrivals_s has " + std::to_string(n));
        }
        if (cfg_.tier.size() != n) {
            throw std::invalid_argument("Simulator: tier has " + std::to_string(cfg_.tier.size()) +
                                        " entries but arrivals_s has " + std::to_string(n));
        }
        for (std::size_t i = 0; i < n; ++i) {
            if (cfg_.arrivals_ns[i] < 0 || (i > 0 && cfg_.arrivals_ns[i] < cfg_.arrivals_ns[i - 1])) {
                throw std::invalid_argument("Simulator: arrivals_s[" + std::to_string(i) + "]=" +
                                            std::to_string(static_cast<double>(cfg_.arrivals_ns[i]) * 1e-9) +
                                            " must be >= 0 and not before arrivals_s[" + std::to_string(i ? i - 1 : 0) +
                                            "] (sort the arrivals)");
            }
            if (cfg_.arrivals_ns[i] > kMaxTimeNs) {
                throw std::invalid_argument("Simulator: arrivals_s[" + std::to_string(i) + "]=" +
                                            std::to_string(static_cast<double>(cfg_.arrivals_ns[i]) * 1e-9) +
                                            " exceeds 1e9 s");
            }
            if (cfg_.slo_ns[i] <= 0 || cfg_.slo_ns[i] > kMaxTimeNs) {
                throw std::invalid_argument("Simulator: slo_s[" + std::to_string(i) + "]=" +
                                            std::to_string(static_cast<double>(cfg_.slo_ns[i]) * 1e-9) +
                                            " must be in (0, 1e9] s");
            }
        }
        if (!std::isfinite(cfg_.jitter_cv) || cfg_.jitter_cv < 0.0 || cfg_.jitter_cv > kMaxJitterCv) {
            throw std::invalid_argument("Simulator: jitter_cv=" + std::to_string(cfg_.jitter_cv) + " must be in [0, 10]");
        }
        if (cfg_.cold_start_ns < 0) {
            throw std::invalid_argument("Simulator: cold_start_s=" +
                                        std::to_string(static_cast<double>(cfg_.cold_start_ns) * 1e-9) + " must be >= 0");
        }
    }

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
            const SimStageConfig& c = cfg_.stages[i];
            StageRt& s = stages_[i];
            StageConfig sc;
            sc.stage = static_cast<int>(i);
            sc.profile = c.profile;
            sc.max_batch = c.max_batch;
            sc.policy = cfg_.policy;
            sc.budget_fraction = c.budget_fraction;
            sc.ring_capacity = cfg_.ring_capacity;
            sc.tier_weights = cfg_.tier_weights;
            sc.entry = preds[i] == 0;
            s.sched = std::make_unique<StageScheduler>(sc);  // validates max_batch, budget_fraction
            s.profile = c.profile;
            s.exec_scale = c.exec_scale;
            s.max_batch = c.max_batch;
            s.succ = c.successors;
            s.sink = c.successors.empty();
            s.scratch.batch.reserve(static_cast<std::size_t>(c.max_batch));
            s.workers.resize(static_cast<std::size_t>(c.workers));
            s.idle = c.workers;
            for (Worker& w : s.workers) {
                w.running.reserve(static_cast<std::size_t>(c.max_batch));
                w.next.reserve(static_cast<std::size_t>(c.max_batch));
            }
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
        n_joins_ = static_cast<std::size_t>(joins);
        const std::size_t n = cfg_.arrivals_ns.size();
        state_.assign(n, Outcome::kPending);
        finish_.assign(n, -1);
        drop_stage_.assign(n, -1);
        reason_.assign(n, -1);
        compute_.assign(n, 0.0);
        sinks_left_.assign(n, static_cast<std::uint16_t>(n_sinks_));
        join_count_.assign(n * n_joins_, 0);
        if (cfg_.jitter_cv > 0.0) {
            sigma_ = std::sqrt(std::log1p(cfg_.jitter_cv * cfg_.jitter_cv));
            mu_ = -0.5 * sigma_ * sigma_;
        }
    }

    bool cancelled(std::uint64_t id) const noexcept { return state_[id] != Outcome::kPending; }

    // Terminal states are set once.
    void terminate(const Request& r, Outcome o, int stage, Reason why) {
        if (state_[r.id] != Outcome::kPending) return;
        state_[r.id] = o;
        drop_stage_[r.id] = stage;
        reason_[r.id] = static_cast<std::int32_t>(why);
        finish_[r.id] = now_;
    }

    void handle_drops(std::size_t stage, const std::vector<Drop>& drops) {
        StageRt& s = stages_[stage];
        for (const Drop& d : drops) {
            if (d.reason == Reason::kCancelled) continue;  // a discarded copy; the request is already terminal
            ++s.stats.dropped;
            terminate(d.request, d.reason == Reason::kRejected ? Outcome::kRejected : Outcome::kDropped,
                      static_cast<int>(stage), d.reason);
        }
    }

    void on_arrival(std::size_t i) {
        const std::int64_t t = cfg_.arrivals_ns[i];
        const Request r{static_cast<std::uint64_t>(i), t, t + cfg_.slo_ns[i], t, cfg_.tier[i], 0};
        for (std::size_t e : entries_) deliver(e, r);
    }

    void deliver(std::size_t stage, Request r) {
        StageRt& s = stages_[stage];
        r.arrival_ns = now_;
        if (!s.sched->submit_local(r)) {
            s.scratch.drops.clear();
            s.sched->drain(s.scratch.drops, [this](std::uint64_t id) { return cancelled(id); });
            handle_drops(stage, s.scratch.drops);
            const bool ok = s.sched->submit_local(r);
            (void)ok;  // the ring was just emptied by the only thread that submits to it
        }
        s.stats.arrival.push_back(now_);
        if (!s.kick_pending && s.idle > 0) {
            s.kick_pending = true;
            events_.push(now_, kPrioKick, kKick, static_cast<std::uint32_t>(stage), 0);
        } else if (s.idle == 0 && !s.kick_pending && cfg_.policy.drop == DropRule::kPard) {
            purge_busy(stage);
        }
    }

    // Every worker busy: purge for the earliest time one of them can start a new batch (nominal
    // durations; see the header comment).
    void purge_busy(std::size_t stage) {
        StageRt& s = stages_[stage];
        const std::int64_t t_e = earliest_free(s);
        if (t_e == std::numeric_limits<std::int64_t>::max()) return;
        s.scratch.drops.clear();
        s.sched->purge(now_, t_e, s.scratch.drops, [this](std::uint64_t id) { return cancelled(id); });
        handle_drops(stage, s.scratch.drops);
    }

    // A worker's class in free_heaps (see StageRt) and its time; class -1: it starts no new batch.
    static std::pair<int, std::int64_t> free_key(const Worker& w) noexcept {
        if (w.st == WState::kCold) return {0, w.ready_at};
        if (w.st == WState::kBusy && !w.retiring) {
            return {w.has_next ? 1 + static_cast<int>(w.next.size()) : 1, w.nominal_end};
        }
        return {-1, 0};
    }

    // Records worker wi's current key in its stage's free index (pard only: no other policy reads it).
    // Called after every change of a worker's state, retiring flag, pre-collected batch or times.
    void touch(StageRt& s, std::size_t wi) {
        if (cfg_.policy.drop != DropRule::kPard) return;
        const auto [cls, t] = free_key(s.workers[wi]);
        if (wi >= s.free_keys.size()) s.free_keys.resize(s.workers.size());
        FreeKey& k = s.free_keys[wi];
        if (k.cls == cls && k.t == t) return;  // unchanged: its entry is still live
        k.cls = cls;
        k.t = t;
        s.free_dirty = true;
        if (cls < 0) return;  // its old entries went stale with the state change
        const auto c = static_cast<std::size_t>(cls);
        if (c >= s.free_heaps.size()) {
            s.free_heaps.resize(std::max(c, static_cast<std::size_t>(s.max_batch)) + 2);
        }
        std::vector<FreeEntry>& h = s.free_heaps[c];
        if (h.empty()) s.free_classes.push_back(c);
        h.push_back({t, static_cast<std::uint32_t>(wi)});
        std::push_heap(h.begin(), h.end(), FreeAfter{});
        if (++s.free_entries > 4 * s.workers.size() + 64) compact_free(s);
    }

    // Drops every stale entry (bounds the index at a few entries per worker whatever is queried).
    static void compact_free(StageRt& s) {
        s.free_entries = 0;
        s.free_classes.clear();
        for (std::size_t c = 0; c < s.free_heaps.size(); ++c) {
            std::vector<FreeEntry>& h = s.free_heaps[c];
            h.erase(std::remove_if(h.begin(), h.end(), [&](const FreeEntry& e) { return !live(s, c, e); }),
                    h.end());
            std::make_heap(h.begin(), h.end(), FreeAfter{});
            s.free_entries += h.size();
            if (!h.empty()) s.free_classes.push_back(c);
        }
    }

    // Reads the compact key array, not the Worker (one cache line per 4 workers instead of one each).
    static bool live(const StageRt& s, std::size_t cls, const FreeEntry& e) noexcept {
        const FreeKey& k = s.free_keys[e.worker];
        return k.cls == static_cast<int>(cls) && k.t == e.t;
    }

    // The earliest time a worker of s can start a new batch (cold: ready_at; busy, not retiring:
    // max(now, nominal_end) + d_k(b) of its pre-collected batch, if any); int64 max if none can.
    std::int64_t earliest_free(StageRt& s) {
        if (!s.free_dirty && s.free_cached_at == now_) return s.free_cached;
        std::int64_t t_e = std::numeric_limits<std::int64_t>::max();
        for (std::size_t i = s.free_classes.size(); i-- > 0;) {  // backwards: removal swaps in a visited class
            const std::size_t c = s.free_classes[i];
            std::vector<FreeEntry>& h = s.free_heaps[c];
            while (!h.empty() && !live(s, c, h.front())) {
                std::pop_heap(h.begin(), h.end(), FreeAfter{});
                h.pop_back();
                --s.free_entries;
            }
            if (h.empty()) {
                s.free_classes[i] = s.free_classes.back();
                s.free_classes.pop_back();
                continue;
            }
            std::int64_t free = h.front().t;
            if (c > 0) {
                free = std::max(now_, free);
                if (c > 1) free += s.sched->expected_duration_ns(static_cast<std::int64_t>(c - 1));
            }
            t_e = std::min(t_e, free);
        }
        s.free_cached = t_e;
        s.free_cached_at = now_;
        s.free_dirty = false;
        return t_e;
    }

    static void set_state(StageRt& s, Worker& w, WState st) noexcept {
        if (w.st == WState::kIdle) --s.idle;
        if (st == WState::kIdle) ++s.idle;
        w.st = st;
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
        StageRt& s = stages_[stage];
        s.sched->form_batch(now_, t_e, s.scratch, [this](std::uint64_t id) { return cancelled(id); });
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

    double jitter() {
        if (sigma_ == 0.0) return 1.0;
        double z;
        if (have_spare_) {
            z = spare_;
            have_spare_ = false;
        } else {
            double u1;
            do {
                u1 = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
            } while (u1 <= 0.0);
            const double u2 = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
            const double r = std::sqrt(-2.0 * std::log(u1));
            const double th = 6.283185307179586476925 * u2;
            z = r * std::cos(th);
            spare_ = r * std::sin(th);
            have_spare_ = true;
        }
        return std::exp(mu_ + sigma_ * z);
    }

    // Starts w.next now; then collects the following batch (t_e = now + d_k(b)) unless the worker is
    // retiring. While a kick is pending (idle workers and same-instant arrivals), the pre-collection
    // waits for that kick, so idle workers take the new requests first (see on_kick).
    void start_next(std::size_t stage, std::size_t wi, bool precollect) {
        StageRt& s = stages_[stage];
        Worker& w = s.workers[wi];
        w.running.swap(w.next);
        w.has_next = false;
        set_state(s, w, WState::kBusy);
        const auto size = static_cast<std::int64_t>(w.running.size());
        const std::int64_t nominal = s.profile.duration_ns(size);
        auto dur = static_cast<std::int64_t>(std::llround(static_cast<double>(nominal) * s.exec_scale * jitter()));
        if (dur < 1) dur = 1;
        w.run_ns = dur;
        events_.push(now_ + dur, kPrioBatchEnd, kBatchEnd, static_cast<std::uint32_t>(stage),
                     static_cast<std::uint32_t>(wi));
        const double share = static_cast<double>(dur) / static_cast<double>(size);
        for (const Request& r : w.running) compute_[r.id] += share;
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

    void on_batch_end(std::size_t stage, std::size_t wi) {
        StageRt& s = stages_[stage];
        {
            Worker& w = s.workers[wi];
            s.sched->observe_batch(static_cast<std::int64_t>(w.running.size()), w.run_ns);
            for (const Request& r : w.running) {
                if (state_[r.id] != Outcome::kPending) continue;  // cancelled meanwhile: wasted, not forwarded
                if (s.sink) {
                    if (--sinks_left_[r.id] == 0) {
                        state_[r.id] = now_ <= r.deadline_ns ? Outcome::kOnTime : Outcome::kLate;
                        finish_[r.id] = now_;
                        if (state_[r.id] == Outcome::kLate) ++s.stats.late;
                    }
                }
                for (int j : s.succ) {
                    StageRt& nxt = stages_[static_cast<std::size_t>(j)];
                    if (nxt.join_index >= 0) {
                        std::uint8_t& c = join_count_[r.id * n_joins_ + static_cast<std::size_t>(nxt.join_index)];
                        if (++c < nxt.n_pred) continue;
                    }
                    deliver(static_cast<std::size_t>(j), r);
                }
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
            set_state(s, w, WState::kRetired);
            w.retiring = false;
            touch(s, wi);
            return;
        }
        if (collect(stage, w, now_)) {
            start_next(stage, wi, true);
        } else {
            set_state(s, w, WState::kIdle);
            touch(s, wi);
        }
    }

    void on_ready(std::size_t stage, std::size_t wi) {
        StageRt& s = stages_[stage];
        Worker& w = s.workers[wi];
        if (w.st != WState::kCold) return;  // removed before it came up
        set_state(s, w, WState::kIdle);
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
        StageRt& s = stages_[stage];
        s.kick_pending = false;
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
    std::vector<StageRt> stages_;
    std::vector<std::size_t> entries_;
    std::size_t n_sinks_ = 0;
    std::size_t n_joins_ = 0;
    EventQueue events_;
    std::size_t next_arrival_ = 0;
    std::int64_t now_ = 0;
    std::mt19937_64 rng_;
    double sigma_ = 0.0;
    double mu_ = 0.0;
    bool have_spare_ = false;
    double spare_ = 0.0;
    std::vector<Outcome> state_;
    std::vector<std::int64_t> finish_;
    std::vector<std::int32_t> drop_stage_;
    std::vector<std::int32_t> reason_;
    std::vector<double> compute_;
    std::vector<std::uint16_t> sinks_left_;
    std::vector<std::uint8_t> join_count_;
    BatchLog log_;
};

}  // namespace pard
