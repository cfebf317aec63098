// pard/live_pipeline.hpp — LivePipeline: the live runtime's per-request hot path.
//
// What it composes. The ledger (pard/live/ledger.hpp: every request in flight, its one terminal
// transition, the outcome ring and the counts), the stage states (pard/live/stage_states.hpp: per
// stage the counts and condition variable around the stage's StageScheduler, which it does not
// own, and the statistics the planner takes), the router (pard/live/router.hpp: queues, routing,
// joins, exits) and the batcher (pard/live/batcher.hpp: the workers' batches). Python enters once
// per batch: a worker calls next_batch (waits, forms, marks the batch running, collects the next
// batch as this one starts, DESIGN §3.1) and complete (charges compute by pard/compute_split.hpp's
// rule, routes every output to its successors, joins, finishes exits); a client calls submit once
// per request.
//
// Concurrency. See the parts: a request's slot and row are guarded by its stripe's mutex, stage
// counters are atomics and a stage's mutex guards its condition variable and statistics logs. Lock
// order: a StageScheduler's batch-forming mutex, then a stripe.
//
// Payload and Handle (the request's future) are opaque, default-constructible, copyable values.
// Every function that creates, copies or destroys them must be called under the caller's guard for
// them (the GIL in the binding; none for plain values): next_batch_wait is the only one that
// blocks and touches none. Payloads leaving a slot are moved to the caller's `Done` list or a trash
// vector and destroyed after the stripe lock is released, so no payload destructor runs under it.
//
// Contract. Every request ends in exactly one terminal state, set once under its stripe lock by
// the ledger's finish_locked; counts() (all stripes locked) satisfies
// submitted = pending + on_time + late + dropped + rejected + failed at every moment.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "pard/compute_split.hpp"
#include "pard/door.hpp"
#include "pard/live/batcher.hpp"
#include "pard/live/ledger.hpp"
#include "pard/live/llm_steps.hpp"
#include "pard/live/router.hpp"
#include "pard/live/stage_states.hpp"
#include "pard/live/types.hpp"
#include "pard/outcome.hpp"
#include "pard/policy.hpp"
#include "pard/request.hpp"
#include "pard/stage_scheduler.hpp"

namespace pard {

template <class Payload, class Handle>
class LivePipeline {
    using Book = live::Ledger<Payload, Handle>;
    using Stages = live::StageStates<Payload>;
    using Route = live::Router<Payload, Handle>;
    using Batches = live::Batcher<Payload, Handle>;
    using LlmSteps = live::LlmSteps<Payload, Handle>;

public:
    using Done = LiveDone<Payload, Handle>;
    using Entry = typename Batches::Entry;
    using Worker = typename Batches::Worker;
    using LlmWorker = typename LlmSteps::Worker;
    using LlmJoiner = typename LlmSteps::Joiner;
    using LlmFinished = typename LlmSteps::Finished;
    using LlmRefused = typename LlmSteps::Refused;
    using Stats = typename Stages::Stats;
    using Hooks = typename Route::Hooks;
    using OutcomeRows = typename Book::OutcomeRows;
    static constexpr int kStripes = Book::kStripes;
    static constexpr std::int64_t kNoDeadline = std::numeric_limits<std::int64_t>::max();  // submit: none
    static constexpr int kSlotBits = live::kSlotBits;
    static constexpr std::uint64_t kSlotMask = live::kSlotMask;
    static constexpr std::size_t kRecent = Stages::kRecent;

    LivePipeline(std::vector<LiveStageSpec> stages, std::vector<int> entries, std::vector<int> exits,
                 std::size_t history, Hooks hooks)
        : specs_(checked(std::move(stages), entries, exits, history)), entries_(std::move(entries)),
          exits_(std::move(exits)), history_(history), stages_(specs_),
          ledger_(specs_.size(), Route::count_joins(specs_), exits_.size() > 1 ? exits_.size() : 0, history_,
                  stages_.stale_counters()),
          router_(specs_, exits_, std::move(hooks), ledger_, stages_), batcher_(specs_, ledger_, stages_, clock_),
          llm_steps_(specs_, ledger_, tokens_, stages_, router_, batcher_, clock_) {
        const std::size_t n = specs_.size();
        std::vector<std::vector<int>> succ;
        for (const auto& s : specs_) succ.push_back(s.successors);
        const auto below = stages_below(succ);  // each scheduler reads the stages below it (overload_below)
        for (std::size_t k = 0; k < n; ++k) {
            std::vector<const StageScheduler*> v;
            for (int j : below[k]) v.push_back(specs_[static_cast<std::size_t>(j)].sched);
            specs_[k].sched->set_below(std::move(v));
        }
        const auto parallel = parallel_branches(succ);  // Policy::coherent_rank's stages
        for (std::size_t k = 0; k < n; ++k) specs_[k].sched->set_parallel(parallel[k] != 0);
        for (const auto& sp : specs_) door_stages_.push_back(DoorStage{sp.sched, sp.capacity_req_s, &sp.successors});
        link_llm(below);
    }
    LivePipeline(const LivePipeline&) = delete;
    LivePipeline& operator=(const LivePipeline&) = delete;

    [[nodiscard]] std::size_t n_stages() const noexcept { return specs_.size(); }
    [[nodiscard]] const LiveStageSpec& spec(int k) const { return specs_[static_cast<std::size_t>(k)]; }
    [[nodiscard]] std::size_t history() const noexcept { return history_; }
    [[nodiscard]] std::size_t outcome_rows() const noexcept { return ledger_.outcome_rows(); }

    // The runtime clock: ns since `origin` (steady clock, the clock of Python's perf_counter).
    void set_origin_ns(std::int64_t origin) noexcept { clock_.set_origin_ns(origin); }
    [[nodiscard]] std::int64_t now_ns() const noexcept { return clock_.now_ns(); }
    // Nanoseconds spent in the hot path so far, all threads: wall time (steady clock) around each
    // submit, next_batch_take (formation with its drops, marking the batch running, collecting the
    // next) and complete (routing, joins, finishing), excluding the waits. One clock pair per call:
    // the thread's CPU clock is a system call that costs more than a call's own work, the steady
    // clock is read in user space. A thread preempted inside a call is charged the time it did not
    // run (rare: the calls take microseconds).
    // Kept per stripe (submit) and per stage (the workers' calls), on lines those calls touch anyway.
    [[nodiscard]] std::int64_t scheduler_ns() const noexcept { return ledger_.sched_ns() + stages_.sched_ns(); }

    // ------------------------------------------------------------------ submit
    // A new request entering every entry stage at send time `now`. `push_fault(stage)`, if set, is a
    // test hook called before each entry push (it may throw: before the first push the request is
    // undone and its id reused; after one, it ends failed with `failure` and the error propagates).
    // Returns the request's key (id << kSlotBits | slot: what cancel() takes); a refusal ends the
    // request at once (appended to `done`). The deadline is send + slo_ns, or `deadline_ns` (absolute,
    // the runtime clock) when that is earlier: a front fixes a client's deadline once, at arrival, and
    // hands it over as it is. A deadline already past makes the SLO 1 ns: the first stage drops it.
    template <class Fault>
    std::uint64_t submit(const Payload& payload, std::int64_t slo_ns, double slo_s, std::int32_t tier, Handle handle,
                         std::vector<Done>& done, Fault&& push_fault, const Payload& failure,
                         std::int64_t deadline_ns = kNoDeadline, const LiveTokens& tokens = {}) {
        const std::int64_t t0 = now_ns();
        if (deadline_ns != kNoDeadline && deadline_ns - t0 < slo_ns) {
            slo_ns = std::max<std::int64_t>(deadline_ns - t0, 1);
            slo_s = static_cast<double>(slo_ns) * 1e-9;
        }
        const std::uint64_t rid = ledger_.take_id();
        auto& st = ledger_.stripe(rid);
        live::Pushed pushed;
        std::vector<Payload> trash;
        std::uint64_t key = 0;
        {
            std::unique_lock<std::mutex> lock(st.mu);
            if (!ledger_.accepting()) {  // set under every stripe lock: see close_admission
                ledger_.give_back_id(rid);
                throw std::runtime_error("this Runtime is not accepting requests (not started, or closed)");
            }
            const std::uint32_t s = ledger_.open_locked(st, rid, t0, slo_ns, slo_s, tier, entries_.front(),
                                                        static_cast<int>(exits_.size()), std::move(handle));
            if (tokens_.on()) tokens_.at_locked(s) = tokens;
            key = live::make_key(rid, s);
            for (std::size_t i = 0; i < entries_.size(); ++i) {
                const int k = entries_[i];
                try {
                    push_fault(k);
                } catch (...) {
                    if (i == 0) {
                        ledger_.undo_locked(st, s, rid);
                        lock.unlock();
                        throw;
                    }
                    ledger_.finish_locked(st, s, Outcome::kFailed, k, -1, EndKind::kFailure, t0, done, trash, failure);
                    lock.unlock();
                    st.sched_ns.fetch_add(now_ns() - t0, std::memory_order_relaxed);
                    stages_.wake_all(pushed);
                    throw;
                }
                if (!router_.enqueue_locked(st, s, k, t0, payload, done, trash, true)) break;
                pushed.add(k);
            }
        }
        stages_.wake_all(pushed);
        st.sched_ns.fetch_add(now_ns() - t0, std::memory_order_relaxed);
        return key;
    }

    // The door test (pard/door.hpp) over the entry stages: the latest estimated finish (ns) of a
    // request of tier `tier` arriving now, by the entry's rule and by the path walk, with `in_front`
    // requests admitted ahead of it that have not reached the entry queues yet.
    [[nodiscard]] std::int64_t door_finish_ns(std::int32_t tier, std::size_t in_front = 0) const noexcept {
        const std::int64_t now = now_ns();
        std::int64_t finish = now;
        for (const int k : entries_) {
            const StageScheduler& s = *spec(k).sched;
            const auto& w = s.config().tier_weights;
            const bool tiered = s.config().policy.tiered && tier >= 0 && static_cast<std::size_t>(tier) < w.size();
            finish = std::max(finish, pard::door_finish_ns(s, spec(k).capacity_req_s,
                                                           tiered ? w[static_cast<std::size_t>(tier)] : 0.0, now,
                                                           in_front));
            finish = std::max(finish, door_path_finish_ns(door_stages_, k, now, in_front));
        }
        return finish;
    }

    // Admission: a submit either completes before close_admission() returns (and is in flight) or
    // raises; so a drain that starts after it sees every request that will ever be submitted.
    void open_admission() { ledger_.open_admission(); }
    void close_admission() { ledger_.close_admission(); }

    // ------------------------------------------------------------------ the worker's batch
    // Blocks until stage k has something queued or stop() (the caller releases its guard around this).
    // True when work is due (or the worker holds a collected batch), false to stop.
    bool next_batch_wait(Worker& w) { return batcher_.next_batch_wait(w); }

    // Forms (or takes the collected) batch, marks it running and moves its payloads to `payloads`;
    // then, as it starts, collects the next one. Empty `payloads`: nothing to run (wait again).
    // `form_hook(stage)`, if set, is a test hook called before each formation (it may throw).
    template <class FormHook>
    void next_batch_take(Worker& w, std::vector<Payload>& payloads, std::vector<Done>& done, FormHook&& form_hook) {
        batcher_.next_batch_take(w, payloads, done, form_hook);
    }

    // Stage k's purge for a stage whose workers are all busy (live::Batcher::purge); any thread.
    void purge(int k, std::int64_t now, std::int64_t t_e, std::vector<Done>& done) { batcher_.purge(k, now, t_e, done); }

    // The executor returned for w.running: `outs` (one per request) or, when `failed`, `err`.
    void complete(Worker& w, std::vector<Payload>& outs, bool failed, const Payload& err, std::int64_t start_ns,
                  std::int64_t end_ns, std::vector<Done>& done) {
        const std::int64_t t0 = now_ns();
        const int k = w.stage;
        const std::size_t n = w.running.size();
        auto& ss = stages_[k];
        {
            std::lock_guard<std::mutex> lock(ss.mu);
            stages_.log_batch_locked(k, live::to_s(start_ns), live::to_s(end_ns - start_ns), static_cast<std::int64_t>(n),
                                     live::to_s(start_ns - w.t_b_ns));
        }
        spec(k).sched->observe_batch(static_cast<std::int64_t>(n), end_ns - start_ns);
        const double share = n ? live::to_s(end_ns - start_ns) / static_cast<double>(n) : 0.0;
        const BatchShares shares(end_ns - start_ns, n);  // pard/compute_split.hpp's whole-ns shares
        if (spec(k).successors.empty()) done.reserve(done.size() + n);  // an exit: most of them end here
        std::vector<Payload> trash;
        live::Pushed pushed;
        typename Book::StripeLock cur;
        for (std::size_t i = 0; i < n; ++i) {
            const std::uint64_t key = w.running[i].key;
            auto& st = cur.at(ledger_.stripe(key >> kSlotBits));
            auto* sl = ledger_.pending_slot_locked(key);
            const std::int64_t split_share = shares(i);
            if (sl == nullptr) {  // ended while its batch ran (a sibling branch dropped it): not on time
                st.split.charge_ended(static_cast<std::size_t>(k), split_share, Outcome::kDropped);
                continue;
            }
            sl->running = false;
            ledger_.charge_locked(st, sl->rid, share);
            const std::uint32_t s = static_cast<std::uint32_t>(key & kSlotMask);
            st.split.charge_pending(static_cast<std::size_t>(k), split_share, ledger_.tally_of(s));
            if (failed) {
                ledger_.finish_locked(st, s, Outcome::kFailed, k, -1, EndKind::kExecutor, end_ns, done, trash, err);
                continue;
            }
            if (sl->cancel_asked) {  // cancel() while this batch ran: no stage after it spends on the request
                ledger_.finish_locked(st, s, Outcome::kDropped, k, static_cast<int>(Reason::kCancelled), EndKind::kCancel,
                                      end_ns, done, trash, Payload{});
                continue;
            }
            router_.route_locked(cur.lock, st, s, k, outs[i], end_ns, done, trash, pushed);
        }
        cur.release();
        w.running.clear();
        stages_.wake_all(pushed);
        ss.sched_ns.fetch_add(now_ns() - t0, std::memory_order_relaxed);
    }

    // ------------------------------------------------------------------ an LLM stage's worker
    // The step boundary of an LLM stage's worker (pard/live/llm_steps.hpp): the step over [start, end]
    // ended with `finished` done and `refused` never run (or `failed` with `err`); fills the keys to stop and
    // the joiners.
    void llm_boundary(LlmWorker& w, std::vector<LlmFinished>& finished, const std::vector<LlmRefused>& refused,
                      bool failed, const Payload& err, std::int64_t start_ns, std::int64_t end_ns,
                      std::vector<std::uint64_t>& stops, std::vector<LlmJoiner>& joins, std::vector<Done>& done) {
        llm_steps_.boundary(w, finished, refused, failed, err, start_ns, end_ns, stops, joins, done);
    }
    // Blocks until the worker's stage has something queued or stop() (the caller releases its guard).
    bool llm_wait(const LlmWorker& w) { return llm_steps_.wait(w); }
    // Stage k's published mu, service rate and path rate with the LLM stages' work terms
    // (pard/live/llm_load.hpp); unchanged without an LLM stage. The planner thread only.
    void llm_terms(int k, const std::vector<int>& workers, double& mu, double& service_rate, double& path_rate) {
        if (llm_loads_) llm_loads_->adjust(k, workers, now_ns(), mu, service_rate, path_rate);
    }
    // Whether stage k is an LLM stage (its workers step through llm_boundary).
    [[nodiscard]] bool is_llm(int k) const { return spec(k).sched->llm().cost() != nullptr; }

    // ------------------------------------------------------------------ ending requests
    // future.cancel(): ends request `rid` dropped (reason cancelled) unless it ended or its batch runs. A
    // running batch is not interrupted, but what runs on is no longer the client's: the request ends,
    // cancelled, as that batch ends (complete()), and no stage after it spends on it.
    bool cancel(std::uint64_t key, std::vector<Done>& done) {
        auto& st = ledger_.stripe(key >> kSlotBits);
        std::vector<Payload> trash;
        std::lock_guard<std::mutex> lock(st.mu);
        auto* p = ledger_.pending_slot_locked(key);
        if (p == nullptr) return false;
        if (p->running) {
            p->cancel_asked = true;
            return false;
        }
        const std::uint32_t s = static_cast<std::uint32_t>(key & kSlotMask);
        ledger_.finish_locked(st, s, Outcome::kDropped, p->stage, static_cast<int>(Reason::kCancelled), EndKind::kCancel,
                              now_ns(), done, trash, Payload{});
        return true;
    }

    // Ends request `rid` (if still pending) as failed at `stage` with a ready exception.
    bool fail(std::uint64_t key, int stage, EndKind kind, const Payload& exc, std::vector<Done>& done) {
        auto& st = ledger_.stripe(key >> kSlotBits);
        std::vector<Payload> trash;
        std::lock_guard<std::mutex> lock(st.mu);
        if (ledger_.pending_slot_locked(key) == nullptr) return false;
        const std::uint32_t s = static_cast<std::uint32_t>(key & kSlotMask);
        ledger_.finish_locked(st, s, Outcome::kFailed, stage, -1, kind, now_ns(), done, trash, exc);
        return true;
    }

    // Every request still in flight ends dropped, reason cancelled (close, an abandoned runtime).
    void cancel_all(std::vector<Done>& done) {
        const std::int64_t now = now_ns();
        std::vector<Payload> trash;
        for (auto& st : ledger_.stripes()) {
            std::lock_guard<std::mutex> lock(st.mu);
            for (std::uint32_t s : ledger_.occupied_locked(st)) {
                ledger_.finish_locked(st, s, Outcome::kDropped, ledger_.slot_ref(s).stage,
                                      static_cast<int>(Reason::kCancelled), EndKind::kClosed, now, done, trash, Payload{});
            }
        }
    }

    // Keys of the requests in flight that stage k's queue holds, or that worker `w` holds (a dying worker's).
    std::vector<std::uint64_t> held_at(int k, const Worker* w) {
        std::vector<std::uint64_t> ids;
        if (w != nullptr) {
            for (const auto* b : {&w->running, &w->next}) {
                for (const Entry& e : *b) ids.push_back(e.key);
            }
        }
        for (auto& st : ledger_.stripes()) {
            std::lock_guard<std::mutex> lock(st.mu);
            for (std::uint32_t s : ledger_.occupied_locked(st)) {
                const auto& sl = ledger_.slot_ref(s);
                if (sl.queued & (std::uint64_t{1} << k)) ids.push_back(live::make_key(sl.rid, s));
            }
        }
        return ids;
    }

    // Marks stage k dead: a request routed to it from now on fails with `exc`.
    void mark_dead(int k, const Payload& exc) { stages_.mark_dead(k, exc); }
    void stop() { stages_.stop(); }

    // Blocks until nothing is in flight or `until_ns` (runtime clock; < 0: no limit). True when idle.
    bool wait_idle(std::int64_t until_ns) { return ledger_.wait_idle(until_ns, clock_); }

    // ------------------------------------------------------------------ what the runtime reports
    // {submitted, pending, on_time, late, dropped, rejected, failed}: one consistent moment.
    [[nodiscard]] std::array<std::int64_t, 7> counts() { return ledger_.counts(); }
    [[nodiscard]] std::int64_t in_flight() const noexcept { return ledger_.in_flight(); }
    // Dropped requests by (stage, reason), every request ever: drops[stage * kNumReasons + reason].
    [[nodiscard]] std::vector<std::int64_t> drop_counts() { return ledger_.drop_counts(); }
    // The held rows (the most recent `history` submitted requests) in id order.
    [[nodiscard]] OutcomeRows outcomes() { return ledger_.outcomes(); }
    // Where the compute went (pard/compute_split.hpp), every request ever, at one moment.
    [[nodiscard]] ComputeSplit compute_split() {
        ComputeSplit total(n_stages());
        ledger_.lock_all([&] {
            for (const auto& st : ledger_.stripes()) total.add(st.split);
        });
        return total;
    }

    // Live requests queued at stage k (what max_queue bounds); exact once quiet.
    [[nodiscard]] std::int64_t queued_live(int k) const noexcept { return stages_.queued_live(k); }
    [[nodiscard]] double retry_after_s(int k) const noexcept { return stages_.retry_after_s(k); }

    // The statistics of stage k since the last take (moved out).
    Stats take_stats(int k) {
        Stats s = stages_.take_stats(k);
        ledger_.take_arrivals(k, s.arrival_s);
        std::sort(s.arrival_s.begin(), s.arrival_s.end());
        return s;
    }
    // Adds one batch to stage k's log and recent window as if it had run (tests, replays).
    void log_batch(int k, double start_s, double duration_s, std::int64_t size, double wait_s) {
        stages_.log_batch(k, start_s, duration_s, size, wait_s);
    }
    [[nodiscard]] std::vector<std::array<double, 4>> recent_batches(int k) { return stages_.recent_batches(k); }
    [[nodiscard]] std::vector<double> recent_delays(int k) { return stages_.recent_delays(k); }

private:
    // Requests carry tokens when an LLM stage exists, and every stage's scheduler learns the LLM stages
    // below it (their per-request cost joins its pop rule), as the simulator links them.
    void link_llm(const std::vector<std::vector<int>>& below) {
        bool any = false;
        for (std::size_t k = 0; k < specs_.size(); ++k) {
            std::vector<const llm::StageLlm*> v;
            for (int j : below[k]) {
                if (is_llm(j)) v.push_back(&spec(j).sched->llm());
            }
            any = any || is_llm(static_cast<int>(k));
            specs_[k].sched->llm().set_below(std::move(v));
        }
        if (!any) return;
        tokens_.enable();
        llm_loads_ = std::make_unique<live::LlmLoads>(specs_, below);
        router_.set_llm(&tokens_, llm_loads_.get());
    }

    // The constructor's checks, before any part is built from the stages.
    static std::vector<LiveStageSpec> checked(std::vector<LiveStageSpec> specs, const std::vector<int>& entries,
                                              const std::vector<int>& exits, std::size_t history) {
        const std::size_t n = specs.size();
        if (n == 0 || n > 64) throw std::invalid_argument("LivePipeline: 1..64 stages, got " + std::to_string(n));
        if (history < 1) throw std::invalid_argument("LivePipeline: history must be >= 1");
        if (entries.empty() || exits.empty()) throw std::invalid_argument("LivePipeline: no entry or exit stage");
        for (const auto& s : specs) {
            if (s.sched == nullptr) throw std::invalid_argument("LivePipeline: a stage without a scheduler");
        }
        return specs;
    }

    live::Clock clock_;
    const std::vector<LiveStageSpec> specs_;
    const std::vector<int> entries_, exits_;
    std::vector<DoorStage> door_stages_;  // the door's view of specs_ (fixed after construction)
    const std::size_t history_;
    Stages stages_;
    Book ledger_;
    Route router_;
    Batches batcher_;
    live::TokenBook<kStripes> tokens_;             // the requests' tokens, with an LLM stage (link_llm)
    std::unique_ptr<live::LlmLoads> llm_loads_;    // the LLM stages' load terms, with one (link_llm)
    LlmSteps llm_steps_;
};

}  // namespace pard
