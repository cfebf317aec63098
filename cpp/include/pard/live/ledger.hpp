// pard/live/ledger.hpp — Ledger: the slots of a live pipeline's requests in flight, the outcome
// ring of the most recent `history` requests, the counts by state and by (drop stage, reason), and
// the one terminal transition of a request (finish_locked).
//
// What it holds. Per request in flight a slot (keys, state, the stages whose queues hold it, its
// completion handle) and, beside it in the slot's chunk, its payloads: one input per stage, one
// part per (join, predecessor stage), one output per exit when there are several; and its compute
// per stage so far (its tally, pard/compute_split.hpp: zero while the slot is free, as settle() zeroes
// it at the terminal transition and an undone submit was charged nothing). Per stripe, the arrival
// times per stage since the planner's last take, and where the compute of its requests went.
//
// Concurrency. Slots and outcome rows are split into kStripes stripes by request id, in blocks of
// up to 16 consecutive ids per stripe; every access to a request's slot or row holds its stripe's
// mutex (short, never held while waiting or while a hook runs, never two at once), so submitters
// and workers of requests in different blocks never share a lock. Request ids come from one atomic
// counter. A slot's `live` word (rid + 1 while pending, 0 once terminal) is atomic so that a
// stage's form_batch tells a cancelled queued copy apart without taking the stripe lock (ended()).
// Lock order: a StageScheduler's batch-forming mutex, then a stripe.
//
// Memory. At sparse arrivals every call starts on a cold cache, and each cold line or page costs
// more than the call's own work. A slot is one cache line; its payloads sit in arrays of its chunk;
// consecutive ids share a stripe, so a submitter and a batch of consecutive requests touch one
// stripe, adjacent slots and adjacent outcome rows; no heap allocation per request for them.
//
// Contract. Every request ends in exactly one terminal state, set once under its stripe lock by
// finish_locked; counts() (all stripes locked) satisfies
// submitted = pending + on_time + late + dropped + rejected + failed at every moment. Payloads
// leaving a slot are moved to the caller's `done` list or `trash` vector, so that no payload
// destructor runs under a stripe lock.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

#include "pard/compute_split.hpp"
#include "pard/live/types.hpp"
#include "pard/outcome.hpp"
#include "pard/policy.hpp"

namespace pard::live {

template <class Payload, class Handle>
class Ledger {
public:
    using Done = LiveDone<Payload, Handle>;
    static constexpr int kStripes = 64;
    static constexpr std::size_t kChunk = 256;  // slots per allocation, per stripe
    static constexpr std::size_t kMaxChunks = (std::size_t{1} << kSlotBits) / kStripes / kChunk;
    static constexpr int kMaxBlockShift = 4;  // ids per stripe block: up to 16

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
        bool cancel_asked = false;  // cancelled while its batch ran: it ends, cancelled, when the batch does
        Handle handle;
    };
    // kChunk slots and their payloads: per slot `stride_` payloads (one input per stage, then one
    // part per (join, predecessor stage), then one output per exit when there are several), one
    // parts-left count per join (-1: not started) and one tally entry per stage (ns).
    struct Chunk {
        std::unique_ptr<Slot[]> slots;
        std::unique_ptr<Payload[]> payloads;
        std::unique_ptr<int[]> parts_left;
        std::unique_ptr<std::int64_t[]> tally;
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
        ComputeSplit split;  // the compute charged under this stripe's lock
    };
    // Holds one stripe's lock across consecutive requests of the same stripe (a batch's ids are
    // mostly consecutive, so mostly one block): one lock per stripe run instead of one per request.
    // Never holds two stripes. Router::route_locked may unlock and relock `lock` around a hook.
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
    struct OutcomeRows {
        std::vector<std::int64_t> rid;
        std::vector<double> send_s, slo_s, finish_s, compute_s;
        std::vector<std::int32_t> tier, drop_stage, reason;
        std::vector<std::int8_t> state;
    };

    // `n_stages` stages of which `n_joins` join; `n_outputs` exit outputs kept per slot (0 with one
    // exit); stale[k] is stage k's count of queued requests that ended (pard/live/stage_states.hpp).
    Ledger(std::size_t n_stages, int n_joins, std::size_t n_outputs, std::size_t history,
           std::vector<std::atomic<std::int64_t>*> stale)
        : n_stages_(n_stages), n_joins_(n_joins), history_(history), stale_(std::move(stale)) {
        stride_ = n_stages_ * (1 + static_cast<std::size_t>(n_joins_)) + n_outputs;
        // ids go to the stripes in blocks of 2^shift_ (up to kMaxBlock), as far as the outcome ring
        // allows: rows_ is a multiple of kStripes << shift_, so a row's stripe is its ids' stripe
        while (shift_ < kMaxBlockShift && (std::size_t{kStripes} << (shift_ + 1)) <= history_) ++shift_;
        const std::size_t unit = std::size_t{kStripes} << shift_;
        rows_ = (history_ + unit - 1) / unit * unit;
        rows_v_.assign(rows_, Row{kNoRid, 0, 0.0, 0, kFreeRow, -1, -1, -1, 0.0});
        for (auto& s : stripes_) s.arrivals.resize(n_stages_);
        for (auto& s : stripes_) s.drops.assign(n_stages_ * kNumReasons, 0);
        for (auto& s : stripes_) s.split = ComputeSplit(n_stages_);
    }
    Ledger(const Ledger&) = delete;
    Ledger& operator=(const Ledger&) = delete;

    [[nodiscard]] std::size_t outcome_rows() const noexcept { return rows_; }

    // Consecutive ids share a stripe (a block), so a submitter keeps its stripe, slots and rows warm
    // and a batch of consecutive requests takes few stripe locks.
    Stripe& stripe(std::uint64_t rid) noexcept { return stripes_[(rid >> shift_) % kStripes]; }
    std::array<Stripe, kStripes>& stripes() noexcept { return stripes_; }

    // A new request id; the submit that took it returns it with give_back_id if no other took one.
    std::uint64_t take_id() noexcept { return next_id_.fetch_add(1, std::memory_order_relaxed); }
    void give_back_id(std::uint64_t rid) noexcept {
        std::uint64_t expected = rid + 1;
        next_id_.compare_exchange_strong(expected, rid);
    }
    [[nodiscard]] bool accepting() const noexcept { return accepting_.load(std::memory_order_relaxed); }
    // Admission: set under every stripe lock, so a submit (which reads it under its stripe's lock)
    // either completes before close_admission() returns or raises.
    void open_admission() { lock_all([&] { accepting_.store(true); }); }
    void close_admission() { lock_all([&] { accepting_.store(false); }); }

    // Opens a slot for new request `rid` sent at `send_ns` (caller holds its stripe lock): pending,
    // handed to `stage`, its outcome row written, counted submitted and in flight.
    std::uint32_t open_locked(Stripe& st, std::uint64_t rid, std::int64_t send_ns, std::int64_t slo_ns, double slo_s,
                              std::int32_t tier, int stage, int sinks, Handle&& handle) {
        const std::uint32_t s = alloc_slot_locked(st, rid);
        Slot& sl = slot_ref(s);
        sl.rid = rid;
        sl.send_ns = send_ns;
        sl.deadline_ns = send_ns + slo_ns;
        sl.tier = tier;
        sl.running = false;
        sl.cancel_asked = false;
        sl.stage = stage;
        sl.queued = 0;
        sl.sinks_left = sinks;
        sl.handle = std::move(handle);
        sl.live.store(rid + 1, std::memory_order_release);
        Row& row = row_ref(st, rid);
        // a submitter that took its id long ago must not overwrite a newer request's row
        if (row.rid == kNoRid || row.rid < rid) row = Row{rid, send_ns, slo_s, tier, Outcome::kPending, -1, -1, -1, 0.0};
        st.submitted += 1;
        st.counts[0] += 1;
        inflight_.fetch_add(1, std::memory_order_relaxed);
        return s;
    }

    // slot index s: stripe = s % kStripes, local = s / kStripes, chunk = local / kChunk
    Slot& slot_ref(std::uint32_t s) noexcept { return *of_slot(s, &Chunk::slots, 1); }
    // Slot s's payloads (stride_, laid out as Chunk says), per-join parts-left counts and tally (ns per stage).
    Payload* payloads_of(std::uint32_t s) noexcept { return of_slot(s, &Chunk::payloads, stride_); }
    int* parts_left_of(std::uint32_t s) noexcept { return of_slot(s, &Chunk::parts_left, static_cast<std::size_t>(n_joins_)); }
    std::int64_t* tally_of(std::uint32_t s) noexcept { return of_slot(s, &Chunk::tally, n_stages_); }
    Payload& input_ref(std::uint32_t s, int k) noexcept { return payloads_of(s)[static_cast<std::size_t>(k)]; }
    Payload& part_ref(std::uint32_t s, std::size_t j, int k) noexcept {
        return payloads_of(s)[n_stages_ * (1 + j) + static_cast<std::size_t>(k)];
    }
    Payload& output_ref(std::uint32_t s, std::size_t e) noexcept {
        return payloads_of(s)[n_stages_ * (1 + static_cast<std::size_t>(n_joins_)) + e];
    }

    // The slot of the pending request with scheduler key `key` (caller holds its stripe lock), or null.
    Slot* pending_slot_locked(std::uint64_t key) noexcept {
        Slot& sl = slot_ref(static_cast<std::uint32_t>(key & kSlotMask));
        return sl.live.load(std::memory_order_relaxed) == (key >> kSlotBits) + 1 ? &sl : nullptr;
    }

    // Whether the request with this key has ended (its slot reused or retired): the scheduler's
    // filter for cancelled copies still queued. Lock-free: reads the slot's atomic `live` word.
    bool ended(std::uint64_t key) noexcept {
        Slot* p = slot_ptr_lockfree(static_cast<std::uint32_t>(key & kSlotMask));
        return p == nullptr || p->live.load(std::memory_order_acquire) != (key >> kSlotBits) + 1;
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

    // Adds `share` seconds of compute to request rid's outcome row, unless retired (stripe locked).
    void charge_locked(Stripe& st, std::uint64_t rid, double share) noexcept {
        Row& row = row_ref(st, rid);
        if (row.rid == rid) row.compute_s += share;
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
        give_back_id(rid);
        if (inflight_.fetch_sub(1) == 1) notify_idle();
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
        st.split.settle(state, tally_of(s));
        if (state == Outcome::kDropped) st.drops[static_cast<std::size_t>(stage) * kNumReasons + static_cast<std::size_t>(reason)] += 1;
        for (std::uint64_t q = sl.queued; q != 0; q &= q - 1) {  // its place in those queues is free at once
            stale_[static_cast<std::size_t>(lowest_bit(q))]->fetch_add(1);
        }
        sl.queued = 0;
        sl.running = false;
        sl.cancel_asked = false;
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

    // Blocks until nothing is in flight or `until_ns` (`clock`; < 0: no limit). True when idle.
    bool wait_idle(std::int64_t until_ns, const Clock& clock) {
        std::unique_lock<std::mutex> lock(idle_mu_);
        auto idle = [&] { return inflight_.load() == 0; };
        if (until_ns < 0) {
            idle_cv_.wait(lock, idle);
            return true;
        }
        const std::int64_t left = until_ns - clock.now_ns();
        return idle_cv_.wait_for(lock, std::chrono::nanoseconds(left > 0 ? left : 0), idle);
    }

    // ------------------------------------------------------------------ what the runtime reports
    // Nanoseconds submit spent in the hot path, every stripe.
    [[nodiscard]] std::int64_t sched_ns() const noexcept {
        std::int64_t t = 0;
        for (const Stripe& st : stripes_) t += st.sched_ns.load(std::memory_order_relaxed);
        return t;
    }

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
        std::vector<std::int64_t> d(n_stages_ * kNumReasons, 0);
        lock_all([&] {
            for (const Stripe& st : stripes_) {
                for (std::size_t i = 0; i < d.size(); ++i) d[i] += st.drops[i];
            }
        });
        return d;
    }

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

    // Appends stage k's arrival times since the last take to `out` (and starts new ones).
    void take_arrivals(int k, std::vector<double>& out) {
        for (Stripe& st : stripes_) {
            std::lock_guard<std::mutex> lock(st.mu);
            auto& a = st.arrivals[static_cast<std::size_t>(k)];
            out.insert(out.end(), a.begin(), a.end());
            a.clear();
        }
    }

private:
    static constexpr Outcome kFreeRow = static_cast<Outcome>(-1);
    static constexpr std::uint64_t kNoRid = ~std::uint64_t{0};

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

    Row& row_ref(Stripe&, std::uint64_t rid) noexcept { return rows_v_[rid % rows_]; }

    // Slot s's `width` entries of its chunk's array `arr`.
    template <class T>
    T* of_slot(std::uint32_t s, std::unique_ptr<T[]> Chunk::*arr, std::size_t width) noexcept {
        Stripe& st = stripes_[s % kStripes];
        const std::size_t local = s / kStripes;
        return &(st.chunks[local / kChunk]->*arr)[(local % kChunk) * width];
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
            chunk->tally = std::make_unique<std::int64_t[]>(kChunk * n_stages_);  // zeroed
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

    void notify_idle() {
        std::lock_guard<std::mutex> lock(idle_mu_);
        idle_cv_.notify_all();
    }

    const std::size_t n_stages_;
    const int n_joins_;
    const std::size_t history_;
    const std::vector<std::atomic<std::int64_t>*> stale_;
    std::size_t stride_ = 1;  // payloads per slot (see Chunk)
    std::size_t rows_ = 0;
    int shift_ = 0;            // ids rid .. of one block of 2^shift_ share a stripe
    std::vector<Row> rows_v_;  // the outcome ring: row rid % rows_ (under stripe(rid)'s lock)
    std::array<Stripe, kStripes> stripes_;
    std::atomic<std::uint64_t> next_id_{0};
    std::atomic<std::int64_t> inflight_{0};
    std::atomic<bool> accepting_{false};
    std::mutex idle_mu_;
    std::condition_variable idle_cv_;
};

}  // namespace pard::live
