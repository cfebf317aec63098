// pard/live/batcher.hpp — Batcher: a live pipeline's workers' batches. A worker waits for its
// stage's queue, forms a batch with the stage's StageScheduler (ending what it dropped), marks the
// batch running and, as it starts, collects the next one (DESIGN §3.1); a purge ends what became
// infeasible at a stage whose workers are all busy.
//
// Each worker's state (Worker) belongs to one thread. Formation takes the StageScheduler's
// batch-forming mutex inside form_batch and then, one at a time, the stripes of the requests it
// took (pard/live/ledger.hpp): never the other way round.
#pragma once

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <vector>

#include "pard/live/ledger.hpp"
#include "pard/live/stage_states.hpp"
#include "pard/live/types.hpp"
#include "pard/outcome.hpp"
#include "pard/policy.hpp"
#include "pard/request.hpp"
#include "pard/stage_scheduler.hpp"

namespace pard::live {

template <class Payload, class Handle>
class Batcher {
public:
    using Book = Ledger<Payload, Handle>;
    using Done = typename Book::Done;
    using StripeLock = typename Book::StripeLock;

    // One entry of a batch: the scheduler key (rid << kSlotBits | slot) and its arrival at the stage.
    struct Entry {
        std::uint64_t key;
        std::int64_t arrival_ns;
        std::int64_t deadline_ns;
    };
    // Whether a queued copy's request has ended (the StageScheduler's cancelled test).
    struct Ended {
        Book* book;
        bool operator()(std::uint64_t key) const { return book->ended(key); }
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

    Batcher(const std::vector<LiveStageSpec>& specs, Book& ledger, StageStates<Payload>& stages, const Clock& clock)
        : specs_(specs), ledger_(ledger), stages_(stages), clock_(clock) {}
    Batcher(const Batcher&) = delete;
    Batcher& operator=(const Batcher&) = delete;

    // Blocks until stage k has something queued or stop() (the caller releases its guard around this).
    // True when work is due (or the worker holds a collected batch), false to stop.
    bool next_batch_wait(Worker& w) {
        if (w.has_next) return true;
        return stages_.wait(w.stage);
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
        const std::int64_t t0 = clock_.now_ns();
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
            cur.at(ledger_.stripe(e.key >> kSlotBits));
            auto* sl = ledger_.pending_slot_locked(e.key);
            if (sl == nullptr) continue;
            sl->running = true;
            Payload& in = ledger_.input_ref(static_cast<std::uint32_t>(e.key & kSlotMask), k);
            payloads.push_back(std::move(in));
            in = Payload{};
            w.max_deadline_ns = std::max(w.max_deadline_ns, sl->deadline_ns);
            w.running[keep++] = e;
        }
        cur.release();  // before form(): a StageScheduler's mutex comes before any stripe
        w.running.resize(keep);
        auto& ss = stages_[k];
        if (keep == 0) {
            ss.sched_ns.fetch_add(clock_.now_ns() - t0, std::memory_order_relaxed);
            return;
        }
        if (ss.pending.load() > 0 && !stages_.stopping()) {  // DESIGN §3.1: collect the next batch now
            const std::int64_t t_form = clock_.now_ns();
            const std::int64_t d = spec(k).sched->expected_duration_ns(static_cast<std::int64_t>(keep));
            w.next.clear();
            form(w, t_form, t_form + d, w.next, done, form_hook);
            if (!w.next.empty()) {
                w.has_next = true;
                w.next_t_ns = t_form;
            }
        }
        ss.sched_ns.fetch_add(clock_.now_ns() - t0, std::memory_order_relaxed);
    }

    // Stage k's purge (StageScheduler::purge: drain + the pard low-end purge for a batch expected to
    // start at t_e, no batch formed) for a stage whose workers are all busy, so that a request that
    // became infeasible is dropped now rather than when the next batch forms (Triton #7512); ends
    // what it dropped, as form() does. Any thread (the runtime's purge timer).
    void purge(int k, std::int64_t now, std::int64_t t_e, std::vector<Done>& done) {
        const std::int64_t t0 = clock_.now_ns();
        auto& ss = stages_[k];
        std::vector<Drop> drops;
        spec(k).sched->purge(now, t_e, drops, [this](std::uint64_t key) { return ledger_.ended(key); });
        std::vector<Payload> trash;
        const std::int64_t ghosts = end_drops(k, drops, now, done, trash);
        if (!drops.empty()) {
            const auto taken = static_cast<std::int64_t>(drops.size());
            std::lock_guard<std::mutex> lock(ss.mu);
            const std::int64_t left = ss.pending.fetch_sub(taken) - taken;
            const std::int64_t stale = ss.stale.load() - ghosts;
            ss.stale.store(left > 0 && stale > 0 ? stale : 0);
        }
        ss.sched_ns.fetch_add(clock_.now_ns() - t0, std::memory_order_relaxed);
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
            auto& st = cur.at(ledger_.stripe(key >> kSlotBits));
            auto* sl = ledger_.pending_slot_locked(key);
            if (sl == nullptr) {
                ++ghosts;
                continue;
            }
            sl->queued &= ~bit;
            to_trash(ledger_.input_ref(static_cast<std::uint32_t>(key & kSlotMask), k), trash);
            ledger_.finish_locked(st, static_cast<std::uint32_t>(key & kSlotMask), Outcome::kDropped, k,
                                  static_cast<int>(d.reason), EndKind::kPolicy, now, done, trash, Payload{});
        }
        return ghosts;
    }

private:
    const LiveStageSpec& spec(int k) const { return specs_[static_cast<std::size_t>(k)]; }

    // One form_batch of stage w.stage at `now` for a batch expected to start at t_e; ends what it
    // dropped; the live requests it took go to `into`.
    template <class FormHook>
    void form(Worker& w, std::int64_t now, std::int64_t t_e, std::vector<Entry>& into, std::vector<Done>& done,
              FormHook& hook) {
        const int k = w.stage;
        hook(k);
        BatchResult& out = w.out;
        spec(k).sched->form_batch(now, t_e, out, [this](std::uint64_t key) { return ledger_.ended(key); });
        const std::uint64_t bit = std::uint64_t{1} << k;
        std::vector<Payload> trash;
        std::int64_t ghosts = end_drops(k, out.drops, now, done, trash);
        const std::size_t first = w.delays.size();
        StripeLock cur;
        for (const Request& r : out.batch) {
            cur.at(ledger_.stripe(r.id >> kSlotBits));
            auto* sl = ledger_.pending_slot_locked(r.id);
            if (sl == nullptr) {
                ++ghosts;
                continue;
            }
            sl->queued &= ~bit;
            into.push_back(Entry{r.id, r.arrival_ns, r.deadline_ns});
            w.delays.push_back(to_s(now - r.arrival_ns));
        }
        cur.release();
        settle_taken(k, static_cast<std::int64_t>(out.batch.size() + out.drops.size()), ghosts, now, w.delays, first);
    }

public:
    // After a formation at stage k that took `taken` requests off its queue (batch and drops), `ghosts` of
    // them already ended elsewhere: the queue's pending and stale counts, and the queueing delays
    // delays[first..] of the requests it took, logged at `now` (an LLM stage's joins settle here too).
    void settle_taken(int k, std::int64_t taken, std::int64_t ghosts, std::int64_t now, const std::vector<double>& delays,
                      std::size_t first) {
        auto& ss = stages_[k];
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
        for (std::size_t i = first; i < delays.size(); ++i) stages_.log_delay_locked(k, now_s, delays[i]);
    }

private:
    const std::vector<LiveStageSpec>& specs_;
    Book& ledger_;
    StageStates<Payload>& stages_;
    const Clock& clock_;
};

}  // namespace pard::live
