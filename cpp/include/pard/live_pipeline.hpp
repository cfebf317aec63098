// pard/live_pipeline.hpp — LivePipeline: the live runtime's per-request hot path (issue 15).
//
// What it holds. Every request in flight (a slot: keys, state, the stages whose queues hold it,
// its payload per stage, DAG join parts, exit outputs, its completion handle), the outcome ring of
// the most recent `history` requests, the counts by state / drop stage and reason, and per stage
// the batch-forming state around the stage's StageScheduler (pard/stage_scheduler.hpp, not owned):
// pending and stale counts, the workers' condition variable, the statistics logs the planner takes.
// Python enters once per batch: a worker calls next_batch (waits, forms, marks the batch running,
// collects the next batch as this one starts, DESIGN §3.1) and complete (charges compute, routes
// every output to its successors, joins, finishes exits).
//
// Concurrency. Slots and outcome rows are split into kStripes stripes by request id, in blocks of
// up to 16 consecutive ids per stripe; every access to a request's slot or row holds its stripe's
// mutex (short, never held while waiting or while a hook runs, never two at once), so submitters
// and workers of requests in different blocks never share a lock. Request ids come from one atomic
// counter. A slot's `live` word (rid + 1 while pending, 0 once terminal) is atomic
// so that a stage's form_batch tells a cancelled queued copy apart without taking the stripe lock.
// Lock order: a StageScheduler's batch-forming mutex, then a stripe. Stage counters are atomics;
// the stage mutex only guards its condition variable and its statistics logs.
//
// Memory (issue 15: at sparse arrivals every call starts on a cold cache, and on the shared VM each
// cold line or page costs up to ~1 us). A slot is one cache line; its payloads sit in arrays of its
// chunk; consecutive ids share a stripe, so a submitter and a batch of consecutive requests touch
// one stripe, adjacent slots and adjacent outcome rows; no heap allocation per request for them.
//
// Payload and Handle (the request's future) are opaque, default-constructible, copyable values.
// Every function that creates, copies or destroys them must be called under the caller's guard for
// them (the GIL in the binding; none for plain values): next_batch_wait is the only one that
// blocks and touches none. Payloads leaving a slot are moved to the caller's `Done` list or a trash
// vector and destroyed after the stripe lock is released, so no payload destructor runs under it.
//
// Contract. Every request ends in exactly one terminal state, set once under its stripe lock by
// finish_locked; counts() (all stripes locked) satisfies
// submitted = pending + on_time + late + dropped + rejected + failed at every moment.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "pard/door.hpp"
#include "pard/outcome.hpp"
#include "pard/policy.hpp"
#include "pard/request.hpp"
#include "pard/stage_scheduler.hpp"

namespace pard {

// One stage of a live pipeline: its scheduler (not owned; outlives the pipeline) and wiring.
struct LiveStageSpec {
    StageScheduler* sched = nullptr;
    std::vector<int> successors;
    std::vector<int> preds;       // in topological order; two or more make a join stage
    std::int64_t max_queue = 1;   // back-pressure bound on live queued requests
    double capacity_req_s = 1.0;  // workers x best b / d(b): the queue's drain rate (retry hints)
};

// Why a request ended, beyond its state and reason (the binding builds the user's exception from it).
enum class EndKind : std::uint8_t {
    kOutput = 0,      // on time or late: `value` is the result
    kPolicy = 1,      // a stage's drop rule (reason set)
    kCancel = 2,      // future.cancel(): the future cancels itself
    kClosed = 3,      // close() or an abandoned runtime cancelled it (reason cancelled)
    kQueueFull = 4,   // back-pressure: the stage's queue held max_queue live requests
    kRingFull = 5,    // back-pressure: the stage's ingress ring was full
    kExecutor = 6,    // the stage's executor raised: `value` is the exception
    kFailure = 7,     // a submit error: `value` is the ready exception
    kJoin = 8,        // the join function raised: `value` is its exception
    kDead = 9,        // a worker of the stage died: `value` is what the binding gave mark_dead
};

// One ended request for the caller to resolve (its handle moved out of the slot).
template <class Payload, class Handle>
struct LiveDone {
    Handle handle;
    std::uint64_t rid = 0;
    Outcome state = Outcome::kPending;
    int stage = 0;
    int reason = -1;
    EndKind kind = EndKind::kOutput;
    Payload value;               // the result (kOutput), the executor's exception, the ready exception
    std::int64_t queued = 0;     // kQueueFull: live requests queued then
    double retry_after_s = 0.0;  // drops at a full queue and rejections: the queue's drain time
};

template <class Payload, class Handle>
class LivePipeline {
public:
    using Done = LiveDone<Payload, Handle>;
    static constexpr int kStripes = 64;
    static constexpr std::int64_t kNoDeadline = std::numeric_limits<std::int64_t>::max();  // submit: none
    static constexpr int kSlotBits = 22;  // in-flight slots per pipeline: 2^22; ids below 2^42
    static constexpr std::uint64_t kSlotMask = (std::uint64_t{1} << kSlotBits) - 1;
    static constexpr std::size_t kChunk = 256;  // slots per allocation, per stripe
    static constexpr std::size_t kMaxChunks = (std::size_t{1} << kSlotBits) / kStripes / kChunk;
    static constexpr std::size_t kRecent = 10000;  // recent batches and queueing delays kept per stage
    static constexpr int kMaxBlockShift = 4;       // ids per stripe block: up to 16

    // One entry of a batch: the scheduler key (rid << kSlotBits | slot) and its arrival at the stage.
    struct Entry {
        std::uint64_t key;
        std::int64_t arrival_ns;
        std::int64_t deadline_ns;
    };
    // One worker's batches: the one running and the one collected as it started (DESIGN §3.1).
    struct Worker {
        int stage = 0;
        std::vector<Entry> running, next;
        std::int64_t next_t_ns = 0, t_b_ns = 0, max_deadline_ns = 0;
        bool has_next = false;
        std::vector<double> delays;  // queueing delays (s) of the requests taken since the last call
        BatchResult out;             // form_batch's output, reused
    };
    // A stage's statistics since the last take (the planner's inputs, DESIGN §3.5).
    struct Stats {
        std::vector<double> arrival_s, qdelay_t_s, qdelay_s, batch_start_s, batch_duration_s, batch_wait_s;
        std::vector<std::int64_t> batch_size;
    };
    struct Hooks {
        // join(stage, parts in predecessor order, out, err): false (err set) when the join failed
        std::function<bool(int, std::vector<Payload>&, Payload&, Payload&)> join;
        // combine(exit stages, their outputs) -> the result of a pipeline with several exits
        std::function<Payload(const std::vector<int>&, std::vector<Payload>&)> combine;
    };

    LivePipeline(std::vector<LiveStageSpec> stages, std::vector<int> entries, std::vector<int> exits,
                 std::size_t history, Hooks hooks)
        : specs_(std::move(stages)), entries_(std::move(entries)), exits_(std::move(exits)),
          history_(history), hooks_(std::move(hooks)) {
        const std::size_t n = specs_.size();
        if (n == 0 || n > 64) throw std::invalid_argument("LivePipeline: 1..64 stages, got " + std::to_string(n));
        if (history_ < 1) throw std::invalid_argument("LivePipeline: history must be >= 1");
        if (entries_.empty() || exits_.empty()) throw std::invalid_argument("LivePipeline: no entry or exit stage");
        std::vector<std::vector<int>> succ;
        for (const auto& s : specs_) {
            if (s.sched == nullptr) throw std::invalid_argument("LivePipeline: a stage without a scheduler");
            succ.push_back(s.successors);
        }
        const auto below = stages_below(succ);  // each scheduler reads the stages below it (overload_below)
        for (std::size_t k = 0; k < n; ++k) {
            std::vector<const StageScheduler*> v;
            for (int j : below[k]) v.push_back(specs_[static_cast<std::size_t>(j)].sched);
            specs_[k].sched->set_below(std::move(v));
        }
        const auto parallel = parallel_branches(succ);  // Policy::coherent_rank's stages
        for (std::size_t k = 0; k < n; ++k) specs_[k].sched->set_parallel(parallel[k] != 0);
        for (const auto& sp : specs_) door_stages_.push_back(DoorStage{sp.sched, sp.capacity_req_s, &sp.successors});
        join_index_.assign(n, -1);
        for (std::size_t k = 0; k < n; ++k) {
            if (specs_[k].preds.size() > 1) join_index_[k] = n_joins_++;
        }
        stride_ = n * (1 + static_cast<std::size_t>(n_joins_)) + (exits_.size() > 1 ? exits_.size() : 0);
        // ids go to the stripes in blocks of 2^shift_ (up to kMaxBlock), as far as the outcome ring
        // allows: rows_ is a multiple of kStripes << shift_, so a row's stripe is its ids' stripe
        while (shift_ < kMaxBlockShift && (std::size_t{kStripes} << (shift_ + 1)) <= history_) ++shift_;
        const std::size_t unit = std::size_t{kStripes} << shift_;
        rows_ = (history_ + unit - 1) / unit * unit;
        rows_v_.assign(rows_, Row{kNoRid, 0, 0.0, 0, kFreeRow, -1, -1, -1, 0.0});
        stages_.reserve(n);
        for (std::size_t k = 0; k < n; ++k) stages_.push_back(std::make_unique<StageState>());
        for (auto& s : stripes_) s.arrivals.resize(n);
        for (auto& s : stripes_) s.drops.assign(n * kNumReasons, 0);
    }
    LivePipeline(const LivePipeline&) = delete;
    LivePipeline& operator=(const LivePipeline&) = delete;

    [[nodiscard]] std::size_t n_stages() const noexcept { return specs_.size(); }
    [[nodiscard]] const LiveStageSpec& spec(int k) const { return specs_[static_cast<std::size_t>(k)]; }
    [[nodiscard]] std::size_t history() const noexcept { return history_; }
    [[nodiscard]] std::size_t outcome_rows() const noexcept { return rows_; }

    // The runtime clock: ns since `origin` (steady clock, the clock of Python's perf_counter).
    void set_origin_ns(std::int64_t origin) noexcept { origin_ns_.store(origin, std::memory_order_relaxed); }
    [[nodiscard]] std::int64_t now_ns() const noexcept {
        const auto t = std::chrono::steady_clock::now().time_since_epoch();
        return std::chrono::duration_cast<std::chrono::nanoseconds>(t).count() - origin_ns_.load(std::memory_order_relaxed);
    }
    // Nanoseconds spent in the hot path so far, all threads: wall time (steady clock) around each
    // submit, next_batch_take (formation with its drops, marking the batch running, collecting the
    // next) and complete (routing, joins, finishing), excluding the waits. One clock pair per call:
    // the thread's CPU clock is a system call (1.6 us measured on the shared box, more than a call's
    // own work), the steady clock is read in user space. A thread preempted inside a call is
    // charged the time it did not run (rare: the calls take microseconds).
    // Kept per stripe (submit) and per stage (the workers' calls), on lines those calls touch anyway.
    [[nodiscard]] std::int64_t scheduler_ns() const noexcept {
        std::int64_t t = 0;
        for (const Stripe& st : stripes_) t += st.sched_ns.load(std::memory_order_relaxed);
        for (const auto& ss : stages_) t += ss->sched_ns.load(std::memory_order_relaxed);
        return t;
    }

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
                         std::int64_t deadline_ns = kNoDeadline) {
        const std::int64_t t0 = now_ns();
        if (deadline_ns != kNoDeadline && deadline_ns - t0 < slo_ns) {
            slo_ns = std::max<std::int64_t>(deadline_ns - t0, 1);
            slo_s = static_cast<double>(slo_ns) * 1e-9;
        }
        const std::uint64_t rid = next_id_.fetch_add(1, std::memory_order_relaxed);
        Stripe& st = stripe(rid);
        Pushed pushed;
        std::vector<Payload> trash;
        std::uint64_t key = 0;
        {
            std::unique_lock<std::mutex> lock(st.mu);
            if (!accepting_.load(std::memory_order_relaxed)) {  // set under every stripe lock: see close_admission
                std::uint64_t expected = rid + 1;
                next_id_.compare_exchange_strong(expected, rid);
                throw std::runtime_error("this Runtime is not accepting requests (not started, or closed)");
            }
            const std::uint32_t s = alloc_slot_locked(st, rid);
            key = make_key(rid, s);
            Slot& sl = slot_ref(s);
            sl.rid = rid;
            sl.send_ns = t0;
            sl.deadline_ns = t0 + slo_ns;
            sl.tier = tier;
            sl.running = false;
            sl.stage = entries_.front();
            sl.queued = 0;
            sl.sinks_left = static_cast<int>(exits_.size());
            sl.handle = std::move(handle);
            sl.live.store(rid + 1, std::memory_order_release);
            Row& row = row_ref(st, rid);
            // a submitter that took its id long ago must not overwrite a newer request's row
            if (row.rid == kNoRid || row.rid < rid) row = Row{rid, t0, slo_s, tier, Outcome::kPending, -1, -1, -1, 0.0};
            st.submitted += 1;
            st.counts[0] += 1;
            inflight_.fetch_add(1, std::memory_order_relaxed);
            for (std::size_t i = 0; i < entries_.size(); ++i) {
                const int k = entries_[i];
                try {
                    push_fault(k);
                } catch (...) {
                    if (i == 0) {
                        undo_locked(st, s, rid);
                        lock.unlock();
                        throw;
                    }
                    finish_locked(st, s, Outcome::kFailed, k, -1, EndKind::kFailure, t0, done, trash, failure);
                    lock.unlock();
                    st.sched_ns.fetch_add(now_ns() - t0, std::memory_order_relaxed);
                    wake_all(pushed);
                    throw;
                }
                if (!enqueue_locked(st, s, k, t0, payload, done, trash, true)) break;
                pushed.add(k);
            }
        }
        wake_all(pushed);
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
    void open_admission() { lock_all([&] { accepting_.store(true); }); }
    void close_admission() { lock_all([&] { accepting_.store(false); }); }

    // ------------------------------------------------------------------ the worker's batch
    // Blocks until stage k has something queued or stop() (the caller releases its guard around this).
    // True when work is due (or the worker holds a collected batch), false to stop.
    bool next_batch_wait(Worker& w) {
        if (w.has_next) return true;
        StageState& ss = *stages_[static_cast<std::size_t>(w.stage)];
        std::unique_lock<std::mutex> lock(ss.mu);
        ss.cv.wait(lock, [&] { return ss.pending.load() > 0 || stopping_.load(); });
        return !stopping_.load();
    }

    // Forms (or takes the collected) batch, marks it running and moves its payloads to `payloads`;
    // then, as it starts, collects the next one. Empty `payloads`: nothing to run (wait again).
    // `form_hook(stage)`, if set, is a test hook called before each formation (it may throw).
    template <class FormHook>
    void next_batch_take(Worker& w, std::vector<Payload>& payloads, std::vector<Done>& done, FormHook&& form_hook) {
        payloads.clear();
        w.delays.clear();
        const int k = w.stage;
        w.running.clear();
        const std::int64_t t0 = now_ns();
        if (w.has_next) {
            w.running.swap(w.next);
            w.has_next = false;
            w.t_b_ns = w.next_t_ns;
        } else {
            form(w, t0, t0, w.running, done, form_hook);
            w.t_b_ns = t0;
        }
        std::size_t keep = 0;
        w.max_deadline_ns = 0;
        StripeLock cur;
        for (const Entry& e : w.running) {  // from here on cancel() fails and the batch runs
            cur.at(stripe(e.key >> kSlotBits));
            Slot* sl = pending_slot_locked(e.key);
            if (sl == nullptr) continue;
            sl->running = true;
            Payload& in = input_ref(static_cast<std::uint32_t>(e.key & kSlotMask), k);
            payloads.push_back(std::move(in));
            in = Payload{};
            w.max_deadline_ns = std::max(w.max_deadline_ns, sl->deadline_ns);
            w.running[keep++] = e;
        }
        cur.release();  // before form(): a StageScheduler's mutex comes before any stripe
        w.running.resize(keep);
        StageState& ss = *stages_[static_cast<std::size_t>(k)];
        if (keep == 0) {
            ss.sched_ns.fetch_add(now_ns() - t0, std::memory_order_relaxed);
            return;
        }
        if (ss.pending.load() > 0 && !stopping_.load()) {  // DESIGN §3.1: collect the next batch now
            const std::int64_t t_form = now_ns();
            const std::int64_t d = spec(k).sched->expected_duration_ns(static_cast<std::int64_t>(keep));
            w.next.clear();
            form(w, t_form, t_form + d, w.next, done, form_hook);
            if (!w.next.empty()) {
                w.has_next = true;
                w.next_t_ns = t_form;
            }
        }
        ss.sched_ns.fetch_add(now_ns() - t0, std::memory_order_relaxed);
    }

    // Stage k's purge (StageScheduler::purge: drain + the pard low-end purge for a batch expected to
    // start at t_e, no batch formed) for a stage whose workers are all busy, so that a request that
    // became infeasible is dropped now rather than when the next batch forms (Triton #7512); ends
    // what it dropped, as form() does. Any thread (the runtime's purge timer).
    void purge(int k, std::int64_t now, std::int64_t t_e, std::vector<Done>& done) {
        const std::int64_t t0 = now_ns();
        StageState& ss = *stages_[static_cast<std::size_t>(k)];
        std::vector<Drop> drops;
        spec(k).sched->purge(now, t_e, drops, [this](std::uint64_t key) { return ended(key); });
        std::vector<Payload> trash;
        const std::int64_t ghosts = end_drops(k, drops, now, done, trash);
        if (!drops.empty()) {
            const auto taken = static_cast<std::int64_t>(drops.size());
            std::lock_guard<std::mutex> lock(ss.mu);
            const std::int64_t left = ss.pending.fetch_sub(taken) - taken;
            const std::int64_t stale = ss.stale.load() - ghosts;
            ss.stale.store(left > 0 && stale > 0 ? stale : 0);
        }
        ss.sched_ns.fetch_add(now_ns() - t0, std::memory_order_relaxed);
    }

    // The executor returned for w.running: `outs` (one per request) or, when `failed`, `err`.
    void complete(Worker& w, std::vector<Payload>& outs, bool failed, const Payload& err, std::int64_t start_ns,
                  std::int64_t end_ns, std::vector<Done>& done) {
        const std::int64_t t0 = now_ns();
        const int k = w.stage;
        const std::size_t n = w.running.size();
        StageState& ss = *stages_[static_cast<std::size_t>(k)];
        {
            std::lock_guard<std::mutex> lock(ss.mu);
            ss.stats.batch_start_s.push_back(to_s(start_ns));
            ss.stats.batch_duration_s.push_back(to_s(end_ns - start_ns));
            ss.stats.batch_size.push_back(static_cast<std::int64_t>(n));
            ss.stats.batch_wait_s.push_back(to_s(start_ns - w.t_b_ns));
            push_recent(ss.recent_batches, std::array<double, 4>{to_s(start_ns), to_s(end_ns - start_ns),
                                                                  static_cast<double>(n), to_s(start_ns - w.t_b_ns)});
        }
        spec(k).sched->observe_batch(static_cast<std::int64_t>(n), end_ns - start_ns);
        const double share = n ? to_s(end_ns - start_ns) / static_cast<double>(n) : 0.0;
        if (spec(k).successors.empty()) done.reserve(done.size() + n);  // an exit: most of them end here
        std::vector<Payload> trash;
        Pushed pushed;
        StripeLock cur;
        for (std::size_t i = 0; i < n; ++i) {
            const std::uint64_t key = w.running[i].key;
            Stripe& st = cur.at(stripe(key >> kSlotBits));
            Slot* sl = pending_slot_locked(key);
            if (sl == nullptr) continue;
            sl->running = false;
            Row& row = row_ref(st, sl->rid);
            if (row.rid == sl->rid) row.compute_s += share;
            const std::uint32_t s = static_cast<std::uint32_t>(key & kSlotMask);
            if (failed) {
                finish_locked(st, s, Outcome::kFailed, k, -1, EndKind::kExecutor, end_ns, done, trash, err);
                continue;
            }
            route_locked(cur.lock, st, s, k, outs[i], end_ns, done, trash, pushed);
        }
        cur.release();
        w.running.clear();
        wake_all(pushed);
        ss.sched_ns.fetch_add(now_ns() - t0, std::memory_order_relaxed);
    }

    // ------------------------------------------------------------------ ending requests
    // future.cancel(): ends request `rid` dropped (reason cancelled) unless it ended or its batch runs.
    bool cancel(std::uint64_t key, std::vector<Done>& done) {
        Stripe& st = stripe(key >> kSlotBits);
        std::vector<Payload> trash;
        std::lock_guard<std::mutex> lock(st.mu);
        Slot* p = pending_slot_locked(key);
        if (p == nullptr || p->running) return false;
        const std::uint32_t s = static_cast<std::uint32_t>(key & kSlotMask);
        Slot& sl = *p;
        finish_locked(st, s, Outcome::kDropped, sl.stage, static_cast<int>(Reason::kCancelled), EndKind::kCancel,
                      now_ns(), done, trash, Payload{});
        return true;
    }

    // Ends request `rid` (if still pending) as failed at `stage` with a ready exception.
    bool fail(std::uint64_t key, int stage, EndKind kind, const Payload& exc, std::vector<Done>& done) {
        Stripe& st = stripe(key >> kSlotBits);
        std::vector<Payload> trash;
        std::lock_guard<std::mutex> lock(st.mu);
        if (pending_slot_locked(key) == nullptr) return false;
        const std::uint32_t s = static_cast<std::uint32_t>(key & kSlotMask);
        finish_locked(st, s, Outcome::kFailed, stage, -1, kind, now_ns(), done, trash, exc);
        return true;
    }

    // Every request still in flight ends dropped, reason cancelled (close, an abandoned runtime).
    void cancel_all(std::vector<Done>& done) {
        const std::int64_t now = now_ns();
        std::vector<Payload> trash;
        for (Stripe& st : stripes_) {
            std::lock_guard<std::mutex> lock(st.mu);
            for (std::uint32_t s : occupied_locked(st)) {
                finish_locked(st, s, Outcome::kDropped, slot_ref(s).stage, static_cast<int>(Reason::kCancelled),
                              EndKind::kClosed, now, done, trash, Payload{});
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
        for (Stripe& st : stripes_) {
            std::lock_guard<std::mutex> lock(st.mu);
            for (std::uint32_t s : occupied_locked(st)) {
                if (slot_ref(s).queued & (std::uint64_t{1} << k)) ids.push_back(make_key(slot_ref(s).rid, s));
            }
        }
        return ids;
    }

    // Marks stage k dead: a request routed to it from now on fails with `exc`.
    void mark_dead(int k, const Payload& exc) {
        StageState& ss = *stages_[static_cast<std::size_t>(k)];
        std::lock_guard<std::mutex> lock(ss.mu);
        ss.dead_exc = exc;
        ss.dead.store(true);
    }

    void stop() {
        stopping_.store(true);
        for (auto& ss : stages_) {
            std::lock_guard<std::mutex> lock(ss->mu);
            ss->cv.notify_all();
        }
    }

    // Blocks until nothing is in flight or `until_ns` (runtime clock; < 0: no limit). True when idle.
    bool wait_idle(std::int64_t until_ns) {
        std::unique_lock<std::mutex> lock(idle_mu_);
        auto idle = [&] { return inflight_.load() == 0; };
        if (until_ns < 0) {
            idle_cv_.wait(lock, idle);
            return true;
        }
        const std::int64_t left = until_ns - now_ns();
        return idle_cv_.wait_for(lock, std::chrono::nanoseconds(left > 0 ? left : 0), idle);
    }

    // ------------------------------------------------------------------ what the runtime reports
    // {submitted, pending, on_time, late, dropped, rejected, failed}: one consistent moment.
    [[nodiscard]] std::array<std::int64_t, 7> counts() {
        std::array<std::int64_t, 7> c{};
        lock_all([&] {
            for (const Stripe& st : stripes_) {
                c[0] += st.submitted;
                for (int i = 0; i < 6; ++i) c[static_cast<std::size_t>(i) + 1] += st.counts[static_cast<std::size_t>(i)];
            }
        });
        return c;
    }

    [[nodiscard]] std::int64_t in_flight() const noexcept { return inflight_.load(); }

    // Dropped requests by (stage, reason), every request ever: drops[stage * kNumReasons + reason].
    [[nodiscard]] std::vector<std::int64_t> drop_counts() {
        std::vector<std::int64_t> d(specs_.size() * kNumReasons, 0);
        lock_all([&] {
            for (const Stripe& st : stripes_) {
                for (std::size_t i = 0; i < d.size(); ++i) d[i] += st.drops[i];
            }
        });
        return d;
    }

    struct OutcomeRows {
        std::vector<std::int64_t> rid;
        std::vector<double> send_s, slo_s, finish_s, compute_s;
        std::vector<std::int32_t> tier, drop_stage, reason;
        std::vector<std::int8_t> state;
    };
    // The held rows (the most recent `history` submitted requests) in id order.
    [[nodiscard]] OutcomeRows outcomes() {
        OutcomeRows o;
        lock_all([&] {
            const std::uint64_t n = next_id_.load();
            const std::uint64_t first = n > history_ ? n - history_ : 0;
            for (std::uint64_t rid = first; rid < n; ++rid) {
                const Row& r = row_ref(stripe(rid), rid);
                if (r.rid != rid || r.state == kFreeRow) continue;  // its submit has not got this far
                o.rid.push_back(static_cast<std::int64_t>(rid));
                o.send_s.push_back(to_s(r.send_ns));
                o.slo_s.push_back(r.slo_s);
                o.tier.push_back(r.tier);
                o.state.push_back(static_cast<std::int8_t>(r.state));
                o.finish_s.push_back(r.finish_ns < 0 ? std::nan("") : to_s(r.finish_ns));
                o.drop_stage.push_back(r.drop_stage);
                o.reason.push_back(r.reason);
                o.compute_s.push_back(r.compute_s);
            }
        });
        return o;
    }

    // Live requests queued at stage k (what max_queue bounds); exact once quiet.
    [[nodiscard]] std::int64_t queued_live(int k) const noexcept {
        const StageState& ss = *stages_[static_cast<std::size_t>(k)];
        const std::int64_t q = ss.pending.load() - ss.stale.load();
        return q > 0 ? q : 0;
    }
    [[nodiscard]] double retry_after_s(int k) const noexcept {
        return static_cast<double>(queued_live(k) + 1) / spec(k).capacity_req_s;
    }

    // The statistics of stage k since the last take (moved out).
    Stats take_stats(int k) {
        Stats s;
        StageState& ss = *stages_[static_cast<std::size_t>(k)];
        {
            std::lock_guard<std::mutex> lock(ss.mu);
            std::swap(s, ss.stats);
        }
        for (Stripe& st : stripes_) {
            std::lock_guard<std::mutex> lock(st.mu);
            auto& a = st.arrivals[static_cast<std::size_t>(k)];
            s.arrival_s.insert(s.arrival_s.end(), a.begin(), a.end());
            a.clear();
        }
        std::sort(s.arrival_s.begin(), s.arrival_s.end());
        return s;
    }
    // Adds one batch to stage k's log and recent window as if it had run (tests, replays).
    void log_batch(int k, double start_s, double duration_s, std::int64_t size, double wait_s) {
        StageState& ss = *stages_[static_cast<std::size_t>(k)];
        std::lock_guard<std::mutex> lock(ss.mu);
        ss.stats.batch_start_s.push_back(start_s);
        ss.stats.batch_duration_s.push_back(duration_s);
        ss.stats.batch_size.push_back(size);
        ss.stats.batch_wait_s.push_back(wait_s);
        push_recent(ss.recent_batches, std::array<double, 4>{start_s, duration_s, static_cast<double>(size), wait_s});
    }
    [[nodiscard]] std::vector<std::array<double, 4>> recent_batches(int k) {
        StageState& ss = *stages_[static_cast<std::size_t>(k)];
        std::lock_guard<std::mutex> lock(ss.mu);
        return {ss.recent_batches.begin(), ss.recent_batches.end()};
    }
    [[nodiscard]] std::vector<double> recent_delays(int k) {
        StageState& ss = *stages_[static_cast<std::size_t>(k)];
        std::lock_guard<std::mutex> lock(ss.mu);
        return {ss.recent_delays.begin(), ss.recent_delays.end()};
    }

private:
    static constexpr Outcome kFreeRow = static_cast<Outcome>(-1);
    static constexpr std::uint64_t kNoRid = ~std::uint64_t{0};

    // The stages a call pushed into and how many into each (no allocation per call).
    struct Pushed {
        std::uint64_t mask = 0;
        std::array<std::int64_t, 64> n{};
        void add(int k) {
            const std::uint64_t bit = std::uint64_t{1} << k;
            if ((mask & bit) == 0) {
                mask |= bit;
                n[static_cast<std::size_t>(k)] = 0;
            }
            n[static_cast<std::size_t>(k)] += 1;
        }
    };
    // One cache line (with an 8-byte Handle): what submit, formation and completion read and write.
    // The request's payloads live beside it in its chunk (Chunk::payloads), not in heap vectors.
    struct alignas(64) Slot {
        std::atomic<std::uint64_t> live{0};  // rid + 1 while pending, 0 otherwise
        std::uint64_t rid = 0;
        std::int64_t send_ns = 0, deadline_ns = 0;
        std::uint64_t queued = 0;   // bit k: stage k's queue holds it
        std::int32_t tier = 0;
        int stage = 0;              // the stage it was last handed to
        int sinks_left = 0;
        bool running = false;
        Handle handle;
    };
    // kChunk slots and their payloads: per slot `stride_` payloads (one input per stage, then one
    // part per (join, predecessor stage), then one output per exit when there are several) and one
    // parts-left count per join (-1: not started).
    struct Chunk {
        std::unique_ptr<Slot[]> slots;
        std::unique_ptr<Payload[]> payloads;
        std::unique_ptr<int[]> parts_left;
    };
    struct Row {
        std::uint64_t rid;
        std::int64_t send_ns;
        double slo_s;
        std::int32_t tier;
        Outcome state;
        std::int64_t finish_ns;
        std::int32_t drop_stage, reason;
        double compute_s;
    };
    struct alignas(64) Stripe {
        // what every request touches first, in two cache lines
        std::mutex mu;
        std::vector<std::uint32_t> free;
        std::size_t n_chunks = 0;
        std::int64_t submitted = 0;
        std::array<std::int64_t, 6> counts{};
        std::atomic<std::int64_t> sched_ns{0};  // submit's share of scheduler_ns()
        std::vector<std::int64_t> drops;
        std::vector<std::vector<double>> arrivals;  // per stage, arrival times (s) since the last take
        std::array<Chunk*, kMaxChunks> chunks{};
        std::array<std::atomic<Slot*>, kMaxChunks> chunk_ptr{};  // lock-free reads (form_batch)
        std::vector<std::unique_ptr<Chunk>> owned;
    };
    // Holds one stripe's lock across consecutive requests of the same stripe (a batch's ids are
    // mostly consecutive, so mostly one block): one lock per stripe run instead of one per request.
    // Never holds two stripes. route_locked may unlock and relock `lock` around a hook.
    struct StripeLock {
        Stripe* st = nullptr;
        std::unique_lock<std::mutex> lock;
        Stripe& at(Stripe& want) {
            if (&want != st || !lock.owns_lock()) {
                release();
                lock = std::unique_lock<std::mutex>(want.mu);
                st = &want;
            }
            return want;
        }
        void release() {
            if (lock.owns_lock()) lock.unlock();
            st = nullptr;
        }
    };
    struct StageState {
        std::mutex mu;  // guards cv, stats, recent windows, dead_exc
        std::condition_variable cv;
        std::atomic<std::int64_t> pending{0};  // pushed and not yet returned by form_batch
        std::atomic<std::int64_t> stale{0};    // of those, ended while queued
        std::atomic<bool> dead{false};
        std::atomic<std::int64_t> sched_ns{0};  // the workers' and the purge's share of scheduler_ns()
        Payload dead_exc;
        Stats stats;
        std::deque<std::array<double, 4>> recent_batches;
        std::deque<double> recent_delays;
    };

    static double to_s(std::int64_t ns) noexcept { return static_cast<double>(ns) * 1e-9; }
    template <class T>
    static void push_recent(std::deque<T>& q, const T& v) {
        if (q.size() == kRecent) q.pop_front();
        q.push_back(v);
    }

    // Consecutive ids share a stripe (a block), so a submitter keeps its stripe, slots and rows warm
    // and a batch of consecutive requests takes few stripe locks (sparse arrivals: every cold cache
    // line or page costs ~1 us on the shared VM).
    Stripe& stripe(std::uint64_t rid) noexcept { return stripes_[(rid >> shift_) % kStripes]; }
    Row& row_ref(Stripe&, std::uint64_t rid) noexcept { return rows_v_[rid % rows_]; }

    // slot index s: stripe = s % kStripes, local = s / kStripes, chunk = local / kChunk
    Slot& slot_ref(std::uint32_t s) noexcept {
        Stripe& st = stripes_[s % kStripes];
        const std::size_t local = s / kStripes;
        return st.chunks[local / kChunk]->slots[local % kChunk];
    }
    // Slot s's payloads (stride_ of them, laid out as Chunk says) and its per-join parts-left counts.
    Payload* payloads_of(std::uint32_t s) noexcept {
        Stripe& st = stripes_[s % kStripes];
        const std::size_t local = s / kStripes;
        return &st.chunks[local / kChunk]->payloads[(local % kChunk) * stride_];
    }
    Payload& input_ref(std::uint32_t s, int k) noexcept { return payloads_of(s)[static_cast<std::size_t>(k)]; }
    Payload& part_ref(std::uint32_t s, std::size_t j, int k) noexcept {
        return payloads_of(s)[specs_.size() * (1 + j) + static_cast<std::size_t>(k)];
    }
    Payload& output_ref(std::uint32_t s, std::size_t e) noexcept {
        return payloads_of(s)[specs_.size() * (1 + static_cast<std::size_t>(n_joins_)) + e];
    }
    int* parts_left_of(std::uint32_t s) noexcept {
        Stripe& st = stripes_[s % kStripes];
        const std::size_t local = s / kStripes;
        return &st.chunks[local / kChunk]->parts_left[(local % kChunk) * static_cast<std::size_t>(n_joins_)];
    }
    Slot* slot_ptr_lockfree(std::uint32_t s) noexcept {
        Stripe& st = stripes_[s % kStripes];
        const std::size_t local = s / kStripes;
        if (local / kChunk >= kMaxChunks) return nullptr;
        Slot* c = st.chunk_ptr[local / kChunk].load(std::memory_order_acquire);
        return c == nullptr ? nullptr : &c[local % kChunk];
    }

    std::uint32_t alloc_slot_locked(Stripe& st, std::uint64_t rid) {
        const std::size_t j = (rid >> shift_) % kStripes;
        if (st.free.empty()) {
            if (st.n_chunks == kMaxChunks) throw std::length_error("LivePipeline: more than 2^22 requests in flight");
            auto chunk = std::make_unique<Chunk>();
            chunk->slots = std::make_unique<Slot[]>(kChunk);
            chunk->payloads = std::make_unique<Payload[]>(kChunk * stride_);
            const std::size_t nj = kChunk * static_cast<std::size_t>(n_joins_);
            chunk->parts_left = std::make_unique<int[]>(nj);
            std::fill(chunk->parts_left.get(), chunk->parts_left.get() + nj, -1);
            const std::size_t c = st.n_chunks++;
            st.chunks[c] = chunk.get();
            st.chunk_ptr[c].store(chunk->slots.get(), std::memory_order_release);
            st.owned.push_back(std::move(chunk));
            for (std::size_t i = kChunk; i-- > 0;) {
                st.free.push_back(static_cast<std::uint32_t>((c * kChunk + i) * kStripes + j));
            }
        }
        const std::uint32_t s = st.free.back();
        st.free.pop_back();
        return s;
    }

    static std::uint64_t make_key(std::uint64_t rid, std::uint32_t s) noexcept { return rid << kSlotBits | s; }
    static int lowest_bit(std::uint64_t q) noexcept {
        int i = 0;
        while ((q & 1) == 0) {
            q >>= 1;
            ++i;
        }
        return i;
    }

    // The slot of the pending request with scheduler key `key` (caller holds its stripe lock), or null.
    Slot* pending_slot_locked(std::uint64_t key) noexcept {
        Slot& sl = slot_ref(static_cast<std::uint32_t>(key & kSlotMask));
        return sl.live.load(std::memory_order_relaxed) == (key >> kSlotBits) + 1 ? &sl : nullptr;
    }

    std::vector<std::uint32_t> occupied_locked(Stripe& st) {
        std::vector<std::uint32_t> out;
        const std::size_t j = static_cast<std::size_t>(&st - stripes_.data());
        for (std::size_t c = 0; c < st.n_chunks; ++c) {
            for (std::size_t i = 0; i < kChunk; ++i) {
                if (st.chunks[c]->slots[i].live.load(std::memory_order_relaxed) != 0) {
                    out.push_back(static_cast<std::uint32_t>((c * kChunk + i) * kStripes + j));
                }
            }
        }
        return out;
    }

    template <class F>
    void lock_all(F&& f) {
        std::array<std::unique_lock<std::mutex>, kStripes> locks;
        for (std::size_t i = 0; i < kStripes; ++i) locks[i] = std::unique_lock<std::mutex>(stripes_[i].mu);
        f();
    }

    template <class V>
    static void to_trash(V& p, std::vector<Payload>& trash) {
        if (static_cast<bool>(p)) {
            trash.push_back(std::move(p));
            p = V{};
        }
    }

    // Undo a submit that reached no queue: counted nowhere; the id is handed out again when no
    // other submit took one meanwhile.
    void undo_locked(Stripe& st, std::uint32_t s, std::uint64_t rid) {
        Slot& sl = slot_ref(s);
        sl.live.store(0, std::memory_order_release);
        sl.handle = Handle{};  // the caller still holds its own copy
        Row& row = row_ref(st, rid);
        if (row.rid == rid) row.state = kFreeRow;
        st.submitted -= 1;
        st.counts[0] -= 1;
        st.free.push_back(s);
        std::uint64_t expected = rid + 1;
        next_id_.compare_exchange_strong(expected, rid);
        if (inflight_.fetch_sub(1) == 1) notify_idle();
    }

    void notify_idle() {
        std::lock_guard<std::mutex> lock(idle_mu_);
        idle_cv_.notify_all();
    }

    // The one terminal transition of a pending request (caller holds its stripe lock).
    Done& finish_locked(Stripe& st, std::uint32_t s, Outcome state, int stage, int reason, EndKind kind,
                        std::int64_t t_ns, std::vector<Done>& done, std::vector<Payload>& trash, const Payload& value) {
        Slot& sl = slot_ref(s);
        sl.live.store(0, std::memory_order_release);
        Row& row = row_ref(st, sl.rid);
        if (row.rid == sl.rid) {  // else retired: counted only
            row.state = state;
            row.finish_ns = t_ns;
            if (state == Outcome::kDropped || state == Outcome::kRejected || state == Outcome::kFailed) row.drop_stage = stage;
            if (state == Outcome::kDropped || state == Outcome::kRejected) row.reason = reason;
        }
        st.counts[0] -= 1;
        st.counts[static_cast<std::size_t>(state)] += 1;
        if (state == Outcome::kDropped) st.drops[static_cast<std::size_t>(stage) * kNumReasons + static_cast<std::size_t>(reason)] += 1;
        for (std::uint64_t q = sl.queued; q != 0; q &= q - 1) {  // its place in those queues is free at once
            stages_[static_cast<std::size_t>(lowest_bit(q))]->stale.fetch_add(1);
        }
        sl.queued = 0;
        sl.running = false;
        Payload* pay = payloads_of(s);
        for (std::size_t i = 0; i < stride_; ++i) to_trash(pay[i], trash);
        if (n_joins_ > 0) std::fill(parts_left_of(s), parts_left_of(s) + n_joins_, -1);
        done.emplace_back();
        Done& d = done.back();
        d.handle = std::move(sl.handle);
        sl.handle = Handle{};
        d.rid = sl.rid;
        d.state = state;
        d.stage = stage;
        d.reason = reason;
        d.kind = kind;
        d.value = value;
        st.free.push_back(s);
        if (inflight_.fetch_sub(1) == 1) notify_idle();
        return d;
    }

    // Hands pending request `s` to stage k arriving at `arrival_ns`; false when it ended instead
    // (a dead stage, a full queue, a full ring).
    bool enqueue_locked(Stripe& st, std::uint32_t s, int k, std::int64_t arrival_ns, const Payload& payload,
                        std::vector<Done>& done, std::vector<Payload>& trash, bool entry) {
        StageState& ss = *stages_[static_cast<std::size_t>(k)];
        Slot& sl = slot_ref(s);
        if (ss.dead.load(std::memory_order_acquire)) {
            finish_locked(st, s, Outcome::kFailed, k, -1, EndKind::kDead, arrival_ns, done, trash, ss.dead_exc);
            return false;
        }
        const Outcome refused = entry ? Outcome::kRejected : Outcome::kDropped;
        const std::int64_t q = queued_live(k);
        if (q >= spec(k).max_queue) {
            Done& d = finish_locked(st, s, refused, k, static_cast<int>(Reason::kRejected), EndKind::kQueueFull,
                                    arrival_ns, done, trash, Payload{});
            d.queued = q;
            d.retry_after_s = retry_after_s(k);
            return false;
        }
        const std::size_t ku = static_cast<std::size_t>(k);
        input_ref(s, k) = payload;
        sl.queued |= std::uint64_t{1} << k;
        sl.stage = k;
        const Request r{make_key(sl.rid, s), sl.send_ns, sl.deadline_ns, arrival_ns, sl.tier, 0};
        if (!spec(k).sched->submit(r)) {
            sl.queued &= ~(std::uint64_t{1} << k);
            to_trash(input_ref(s, k), trash);
            Done& d = finish_locked(st, s, refused, k, static_cast<int>(Reason::kRejected), EndKind::kRingFull,
                                    arrival_ns, done, trash, Payload{});
            d.retry_after_s = retry_after_s(k);
            return false;
        }
        st.arrivals[ku].push_back(to_s(arrival_ns));
        return true;
    }

    // Output `out` of stage k for pending request `s`: to the successors (joined where a stage has
    // several predecessors) or, at an exit, the request finishes. May unlock around the hooks.
    void route_locked(std::unique_lock<std::mutex>& lock, Stripe& st, std::uint32_t s, int k, Payload& out,
                      std::int64_t end_ns, std::vector<Done>& done, std::vector<Payload>& trash, Pushed& pushed) {
        Slot& sl = slot_ref(s);
        const std::uint64_t key = make_key(sl.rid, s);
        const auto& succ = spec(k).successors;
        if (succ.empty()) {
            const Outcome when = end_ns <= sl.deadline_ns ? Outcome::kOnTime : Outcome::kLate;
            if (exits_.size() == 1) {
                finish_locked(st, s, when, k, -1, EndKind::kOutput, end_ns, done, trash, out);
                return;
            }
            const std::size_t e = static_cast<std::size_t>(std::find(exits_.begin(), exits_.end(), k) - exits_.begin());
            output_ref(s, e) = out;
            if (--sl.sinks_left > 0) return;
            std::vector<Payload> outs(exits_.size());
            for (std::size_t i = 0; i < outs.size(); ++i) {
                outs[i] = std::move(output_ref(s, i));
                output_ref(s, i) = Payload{};
            }
            lock.unlock();
            Payload result = hooks_.combine(exits_, outs);
            lock.lock();
            if (pending_slot_locked(key) == nullptr) {
                trash.push_back(std::move(result));
                return;
            }
            finish_locked(st, s, when, k, -1, EndKind::kOutput, end_ns, done, trash, result);
            return;
        }
        for (const int nxt : succ) {
            const std::size_t nu = static_cast<std::size_t>(nxt);
            Payload payload = out;
            if (join_index_[nu] >= 0) {
                const std::size_t j = static_cast<std::size_t>(join_index_[nu]);
                const auto& preds = spec(nxt).preds;
                int& left = parts_left_of(s)[j];
                if (left < 0) left = static_cast<int>(preds.size());
                part_ref(s, j, k) = out;
                if (--left > 0) continue;
                left = -1;
                std::vector<Payload> parts;
                for (const int p : preds) {
                    parts.push_back(std::move(part_ref(s, j, p)));
                    part_ref(s, j, p) = Payload{};
                }
                Payload joined, err;
                lock.unlock();
                const bool ok = hooks_.join(nxt, parts, joined, err);
                lock.lock();
                for (auto& p : parts) to_trash(p, trash);
                if (pending_slot_locked(key) == nullptr) {  // ended meanwhile (a sibling branch dropped, cancelled)
                    to_trash(joined, trash);
                    to_trash(err, trash);
                    return;
                }
                if (!ok) {
                    finish_locked(st, s, Outcome::kFailed, nxt, -1, EndKind::kJoin, end_ns, done, trash, err);
                    to_trash(err, trash);
                    return;
                }
                payload = std::move(joined);
            }
            const bool ok = enqueue_locked(st, s, nxt, end_ns, payload, done, trash, false);
            to_trash(payload, trash);
            if (!ok) return;
            pushed.add(nxt);
        }
    }

    // Counts pushed requests into their stages (in stage order) and wakes that many workers.
    void wake_all(Pushed& pushed) {
        for (std::uint64_t q = pushed.mask; q != 0; q &= q - 1) {
            const int k = lowest_bit(q);
            const std::int64_t m = pushed.n[static_cast<std::size_t>(k)];
            StageState& ss = *stages_[static_cast<std::size_t>(k)];
            {
                std::lock_guard<std::mutex> lock(ss.mu);
                ss.pending.fetch_add(m);
            }
            if (m == 1) ss.cv.notify_one(); else ss.cv.notify_all();
        }
        pushed.mask = 0;
    }

    // Whether the request with this key has ended (its slot reused or retired): the scheduler's
    // filter for cancelled copies still queued. Lock-free: reads the slot's atomic `live` word.
    bool ended(std::uint64_t key) noexcept {
        Slot* p = slot_ptr_lockfree(static_cast<std::uint32_t>(key & kSlotMask));
        return p == nullptr || p->live.load(std::memory_order_acquire) != (key >> kSlotBits) + 1;
    }

    // Ends as dropped at stage k every request the scheduler dropped (form_batch or purge); returns
    // how many had already ended elsewhere (ghosts: a sibling branch, a cancel).
    std::int64_t end_drops(int k, const std::vector<Drop>& drops, std::int64_t now, std::vector<Done>& done,
                           std::vector<Payload>& trash) {
        const std::uint64_t bit = std::uint64_t{1} << k;
        std::int64_t ghosts = 0;
        StripeLock cur;
        for (const Drop& d : drops) {
            const std::uint64_t key = d.request.id;
            Stripe& st = cur.at(stripe(key >> kSlotBits));
            Slot* sl = pending_slot_locked(key);
            if (sl == nullptr) {
                ++ghosts;
                continue;
            }
            sl->queued &= ~bit;
            to_trash(input_ref(static_cast<std::uint32_t>(key & kSlotMask), k), trash);
            finish_locked(st, static_cast<std::uint32_t>(key & kSlotMask), Outcome::kDropped, k, static_cast<int>(d.reason),
                          EndKind::kPolicy, now, done, trash, Payload{});
        }
        return ghosts;
    }

    // One form_batch of stage w.stage at `now` for a batch expected to start at t_e; ends what it
    // dropped; the live requests it took go to `into`.
    template <class FormHook>
    void form(Worker& w, std::int64_t now, std::int64_t t_e, std::vector<Entry>& into, std::vector<Done>& done,
              FormHook& hook) {
        const int k = w.stage;
        hook(k);
        StageState& ss = *stages_[static_cast<std::size_t>(k)];
        BatchResult& out = w.out;
        spec(k).sched->form_batch(now, t_e, out, [this](std::uint64_t key) { return ended(key); });
        const std::uint64_t bit = std::uint64_t{1} << k;
        std::vector<Payload> trash;
        std::int64_t ghosts = end_drops(k, out.drops, now, done, trash);
        const std::size_t first = w.delays.size();
        StripeLock cur;
        for (const Request& r : out.batch) {
            cur.at(stripe(r.id >> kSlotBits));
            Slot* sl = pending_slot_locked(r.id);
            if (sl == nullptr) {
                ++ghosts;
                continue;
            }
            sl->queued &= ~bit;
            into.push_back(Entry{r.id, r.arrival_ns, r.deadline_ns});
            w.delays.push_back(to_s(now - r.arrival_ns));
        }
        cur.release();
        const std::int64_t taken = static_cast<std::int64_t>(out.batch.size() + out.drops.size());
        {
            std::lock_guard<std::mutex> lock(ss.mu);
            if (taken) {
                const std::int64_t left = ss.pending.fetch_sub(taken) - taken;
                if (left > 0) {
                    const std::int64_t stale = ss.stale.load() - ghosts;
                    ss.stale.store(stale > 0 ? stale : 0);
                } else {
                    ss.stale.store(0);
                }
            }
            const double now_s = to_s(now);
            for (std::size_t i = first; i < w.delays.size(); ++i) {
                ss.stats.qdelay_t_s.push_back(now_s);
                ss.stats.qdelay_s.push_back(w.delays[i]);
                push_recent(ss.recent_delays, w.delays[i]);
            }
        }
    }

    const std::vector<LiveStageSpec> specs_;
    const std::vector<int> entries_, exits_;
    std::vector<DoorStage> door_stages_;  // the door's view of specs_ (fixed after construction)
    const std::size_t history_;
    std::size_t rows_ = 0;
    int shift_ = 0;            // ids rid .. of one block of 2^shift_ share a stripe
    std::vector<Row> rows_v_;  // the outcome ring: row rid % rows_ (under stripe(rid)'s lock)
    Hooks hooks_;
    std::vector<int> join_index_;
    int n_joins_ = 0;
    std::size_t stride_ = 1;  // payloads per slot (see Chunk)
    std::array<Stripe, kStripes> stripes_;
    std::vector<std::unique_ptr<StageState>> stages_;
    std::atomic<std::uint64_t> next_id_{0};
    std::atomic<std::int64_t> inflight_{0};
    std::atomic<std::int64_t> origin_ns_{0};
    std::atomic<bool> stopping_{false};
    std::atomic<bool> accepting_{false};
    std::mutex idle_mu_;
    std::condition_variable idle_cv_;
};

}  // namespace pard
