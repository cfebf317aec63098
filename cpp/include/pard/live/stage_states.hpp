// pard/live/stage_states.hpp — StageStates: per stage of a live pipeline, the counts around its
// StageScheduler (pushed and not yet taken, of those ended while queued), the workers' condition
// variable, a dead stage's exception, and the statistics the planner takes (DESIGN §3.5).
//
// Concurrency. The counters are atomics, read without a lock (queued_live is exact once quiet);
// a stage's mutex guards its condition variable, its statistics logs, its recent windows and its
// dead exception; no other lock is taken while it is held.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "pard/live/types.hpp"

namespace pard::live {

template <class Payload>
class StageStates {
public:
    static constexpr std::size_t kRecent = 10000;  // recent batches and queueing delays kept per stage

    // A stage's statistics since the last take (the planner's inputs, DESIGN §3.5).
    struct Stats {
        std::vector<double> arrival_s, qdelay_t_s, qdelay_s, batch_start_s, batch_duration_s, batch_wait_s;
        std::vector<std::int64_t> batch_size;
    };
    struct State {
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

    explicit StageStates(const std::vector<LiveStageSpec>& specs) : specs_(specs) {
        stages_.reserve(specs_.size());
        for (std::size_t k = 0; k < specs_.size(); ++k) stages_.push_back(std::make_unique<State>());
    }
    StageStates(const StageStates&) = delete;
    StageStates& operator=(const StageStates&) = delete;

    State& operator[](int k) noexcept { return *stages_[static_cast<std::size_t>(k)]; }
    const State& operator[](int k) const noexcept { return *stages_[static_cast<std::size_t>(k)]; }

    // Each stage's `stale` counter: the ledger bumps it when a request its queue holds ends.
    [[nodiscard]] std::vector<std::atomic<std::int64_t>*> stale_counters() {
        std::vector<std::atomic<std::int64_t>*> v;
        for (auto& ss : stages_) v.push_back(&ss->stale);
        return v;
    }

    // Nanoseconds the workers and the purge spent in the hot path, every stage.
    [[nodiscard]] std::int64_t sched_ns() const noexcept {
        std::int64_t t = 0;
        for (const auto& ss : stages_) t += ss->sched_ns.load(std::memory_order_relaxed);
        return t;
    }

    // Live requests queued at stage k (what max_queue bounds); exact once quiet.
    [[nodiscard]] std::int64_t queued_live(int k) const noexcept {
        const State& ss = (*this)[k];
        const std::int64_t q = ss.pending.load() - ss.stale.load();
        return q > 0 ? q : 0;
    }
    [[nodiscard]] double retry_after_s(int k) const noexcept {
        return static_cast<double>(queued_live(k) + 1) / specs_[static_cast<std::size_t>(k)].capacity_req_s;
    }

    // Counts pushed requests into their stages (in stage order) and wakes that many workers.
    void wake_all(Pushed& pushed) {
        for (std::uint64_t q = pushed.mask; q != 0; q &= q - 1) {
            const int k = lowest_bit(q);
            const std::int64_t m = pushed.n[static_cast<std::size_t>(k)];
            State& ss = (*this)[k];
            {
                std::lock_guard<std::mutex> lock(ss.mu);
                ss.pending.fetch_add(m);
            }
            if (m == 1) ss.cv.notify_one(); else ss.cv.notify_all();
        }
        pushed.mask = 0;
    }

    // Blocks until stage k has something queued or stop(). True when work is due, false to stop.
    bool wait(int k) {
        State& ss = (*this)[k];
        std::unique_lock<std::mutex> lock(ss.mu);
        ss.cv.wait(lock, [&] { return ss.pending.load() > 0 || stopping_.load(); });
        return !stopping_.load();
    }

    void stop() {
        stopping_.store(true);
        for (auto& ss : stages_) {
            std::lock_guard<std::mutex> lock(ss->mu);
            ss->cv.notify_all();
        }
    }
    [[nodiscard]] bool stopping() const noexcept { return stopping_.load(); }

    // Marks stage k dead: a request routed to it from now on fails with `exc`.
    void mark_dead(int k, const Payload& exc) {
        State& ss = (*this)[k];
        std::lock_guard<std::mutex> lock(ss.mu);
        ss.dead_exc = exc;
        ss.dead.store(true);
    }

    // Adds one batch to stage k's log and recent window (caller holds the stage's mutex).
    void log_batch_locked(int k, double start_s, double duration_s, std::int64_t size, double wait_s) {
        State& ss = (*this)[k];
        ss.stats.batch_start_s.push_back(start_s);
        ss.stats.batch_duration_s.push_back(duration_s);
        ss.stats.batch_size.push_back(size);
        ss.stats.batch_wait_s.push_back(wait_s);
        push_recent(ss.recent_batches, std::array<double, 4>{start_s, duration_s, static_cast<double>(size), wait_s});
    }
    void log_batch(int k, double start_s, double duration_s, std::int64_t size, double wait_s) {
        std::lock_guard<std::mutex> lock((*this)[k].mu);
        log_batch_locked(k, start_s, duration_s, size, wait_s);
    }
    // Adds a request's queueing delay, taken into a batch at now_s (caller holds the stage's mutex).
    void log_delay_locked(int k, double now_s, double delay_s) {
        State& ss = (*this)[k];
        ss.stats.qdelay_t_s.push_back(now_s);
        ss.stats.qdelay_s.push_back(delay_s);
        push_recent(ss.recent_delays, delay_s);
    }

    // Stage k's statistics since the last take, moved out (arrivals are the ledger's, per stripe).
    Stats take_stats(int k) {
        Stats s;
        State& ss = (*this)[k];
        std::lock_guard<std::mutex> lock(ss.mu);
        std::swap(s, ss.stats);
        return s;
    }
    [[nodiscard]] std::vector<std::array<double, 4>> recent_batches(int k) {
        State& ss = (*this)[k];
        std::lock_guard<std::mutex> lock(ss.mu);
        return {ss.recent_batches.begin(), ss.recent_batches.end()};
    }
    [[nodiscard]] std::vector<double> recent_delays(int k) {
        State& ss = (*this)[k];
        std::lock_guard<std::mutex> lock(ss.mu);
        return {ss.recent_delays.begin(), ss.recent_delays.end()};
    }

private:
    template <class T>
    static void push_recent(std::deque<T>& q, const T& v) {
        if (q.size() == kRecent) q.pop_front();
        q.push_back(v);
    }

    const std::vector<LiveStageSpec>& specs_;
    std::vector<std::unique_ptr<State>> stages_;
    std::atomic<bool> stopping_{false};
};

}  // namespace pard::live
