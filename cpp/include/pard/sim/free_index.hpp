// pard/sim/free_index.hpp — FreeWorkerIndex: per simulated stage, when each worker can start a new
// batch, so that a busy arrival's purge (pard/simulator.hpp) finds the earliest such time without
// scanning every worker.
//
// One lazy min-heap of (time, worker) per class: [0] cold workers (time = ready_at), [1 + b] busy
// non-retiring workers with b requests pre-collected (time = nominal_end; b = 0: none). A worker's
// free time is max(now, nominal_end) + d_k(b), monotone in nominal_end within a class, so the
// earliest one is the min over classes of each class's smallest time -- the same t_e as a scan of
// every worker, in O(max_batch) instead of O(workers) per busy arrival. An entry is live iff it
// matches the worker's current class and time (kept in a compact key array), so a state change
// only needs a push of the new key (touch); stale entries are popped when they surface or swept
// out by compaction.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

namespace pard::sim {

class FreeWorkerIndex {
public:
    // Records worker wi's current class (-1: it starts no new batch) and time. Called after every
    // change of a worker's state, retiring flag, pre-collected batch or times; `n_workers` workers
    // now, batches of up to `max_batch`.
    void touch(std::size_t wi, int cls, std::int64_t t, std::size_t n_workers, std::int64_t max_batch) {
        if (wi >= keys_.size()) keys_.resize(n_workers);
        Key& k = keys_[wi];
        if (k.cls == cls && k.t == t) return;  // unchanged: its entry is still live
        k.cls = cls;
        k.t = t;
        dirty_ = true;
        if (cls < 0) return;  // its old entries went stale with the state change
        const auto c = static_cast<std::size_t>(cls);
        if (c >= heaps_.size()) heaps_.resize(std::max(c, static_cast<std::size_t>(max_batch)) + 2);
        std::vector<Entry>& h = heaps_[c];
        if (h.empty()) classes_.push_back(c);
        h.push_back({t, static_cast<std::uint32_t>(wi)});
        std::push_heap(h.begin(), h.end(), After{});
        if (++entries_ > 4 * n_workers + 64) compact();
    }

    // The published terms changed (d_k(b) may have): the cached answer is stale.
    void mark_dirty() noexcept { dirty_ = true; }

    // The earliest time a worker can start a new batch (cold: ready_at; busy, not retiring:
    // max(now, nominal_end) + duration_ns(b) of its pre-collected batch, if any); int64 max if none
    // can. The answer is cached while the clock and every key stay the same (the arrivals of one
    // upstream batch reach a stage at one instant) and nothing is published meanwhile.
    template <class DurationNs>
    std::int64_t earliest(std::int64_t now, DurationNs&& duration_ns) {
        if (!dirty_ && cached_at_ == now) return cached_;
        return recompute(now, duration_ns);
    }

private:
    template <class DurationNs>
    std::int64_t recompute(std::int64_t now, DurationNs& duration_ns) {
        std::int64_t t_e = std::numeric_limits<std::int64_t>::max();
        for (std::size_t i = classes_.size(); i-- > 0;) {  // backwards: removal swaps in a visited class
            const std::size_t c = classes_[i];
            std::vector<Entry>& h = heaps_[c];
            while (!h.empty() && !live(c, h.front())) {
                std::pop_heap(h.begin(), h.end(), After{});
                h.pop_back();
                --entries_;
            }
            if (h.empty()) {
                classes_[i] = classes_.back();
                classes_.pop_back();
                continue;
            }
            std::int64_t free = h.front().t;
            if (c > 0) {
                free = std::max(now, free);
                if (c > 1) free += duration_ns(static_cast<std::int64_t>(c - 1));
            }
            t_e = std::min(t_e, free);
        }
        cached_ = t_e;
        cached_at_ = now;
        dirty_ = false;
        return t_e;
    }

    struct Entry {
        std::int64_t t;
        std::uint32_t worker;
    };
    struct Key {
        std::int64_t t = 0;
        int cls = -1;
    };
    // Min-heap order on t (ties in any order: only the smallest t is read).
    struct After {
        bool operator()(const Entry& a, const Entry& b) const noexcept { return a.t > b.t; }
    };

    // Drops every stale entry (bounds the index at a few entries per worker whatever is queried).
    void compact() {
        entries_ = 0;
        classes_.clear();
        for (std::size_t c = 0; c < heaps_.size(); ++c) {
            std::vector<Entry>& h = heaps_[c];
            h.erase(std::remove_if(h.begin(), h.end(), [&](const Entry& e) { return !live(c, e); }), h.end());
            std::make_heap(h.begin(), h.end(), After{});
            entries_ += h.size();
            if (!h.empty()) classes_.push_back(c);
        }
    }

    // Reads the compact key array, not the worker (one cache line per 4 workers instead of one each).
    bool live(std::size_t cls, const Entry& e) const noexcept {
        const Key& k = keys_[e.worker];
        return k.cls == static_cast<int>(cls) && k.t == e.t;
    }

    std::vector<std::vector<Entry>> heaps_;
    std::vector<std::size_t> classes_;  // the classes whose heap is non-empty, in any order
    std::size_t entries_ = 0;           // entries over all heaps (live + stale)
    std::vector<Key> keys_;             // each worker's current key (class -1: none), kept by touch
    std::int64_t cached_ = 0;
    std::int64_t cached_at_ = -1;
    bool dirty_ = true;
};

}  // namespace pard::sim
