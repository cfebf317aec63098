// pard/live/router.hpp — Router: hands a request to a stage's queue and a stage's output to its
// successors in a live pipeline, joining the parts at a stage with several predecessors and
// finishing the request at the exits (combining the outputs of several exits).
//
// Every call runs under the request's stripe lock (pard/live/ledger.hpp); route_locked unlocks it
// around the join and combine hooks and, on relocking, drops the work of a request that ended
// meanwhile (a sibling branch dropped it, a cancel). The requests it pushes are counted in
// `pushed`; the caller wakes those stages' workers once its stripe lock is released.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include "pard/live/ledger.hpp"
#include "pard/live/stage_states.hpp"
#include "pard/live/llm_load.hpp"
#include "pard/live/tokens.hpp"
#include "pard/live/types.hpp"
#include "pard/outcome.hpp"
#include "pard/policy.hpp"
#include "pard/request.hpp"

namespace pard::live {

template <class Payload, class Handle>
class Router {
public:
    using Book = Ledger<Payload, Handle>;
    using Done = typename Book::Done;
    using Stripe = typename Book::Stripe;
    struct Hooks {
        // join(stage, parts in predecessor order, out, err): false (err set) when the join failed
        std::function<bool(int, std::vector<Payload>&, Payload&, Payload&)> join;
        // combine(exit stages, their outputs) -> the result of a pipeline with several exits
        std::function<Payload(const std::vector<int>&, std::vector<Payload>&)> combine;
    };

    Router(const std::vector<LiveStageSpec>& specs, const std::vector<int>& exits, Hooks hooks, Book& ledger,
           StageStates<Payload>& stages)
        : specs_(specs), exits_(exits), hooks_(std::move(hooks)), ledger_(ledger), stages_(stages) {
        join_index_.assign(specs_.size(), -1);
        int n_joins = 0;
        for (std::size_t k = 0; k < specs_.size(); ++k) {
            if (specs_[k].preds.size() > 1) join_index_[k] = n_joins++;
        }
    }
    Router(const Router&) = delete;
    Router& operator=(const Router&) = delete;
    // With an LLM stage, set before any submit: the requests' tokens (pard/live/tokens.hpp), read into each
    // Request it queues, and the LLM stages' load terms (pard/live/llm_load.hpp), told of their arrivals.
    void set_llm(TokenBook<Book::kStripes>* tokens, LlmLoads* loads) noexcept {
        tokens_ = tokens;
        loads_ = loads;
    }

    // How many stages of `specs` join two or more predecessors (the ledger's per-slot layout).
    static int count_joins(const std::vector<LiveStageSpec>& specs) noexcept {
        int n = 0;
        for (const auto& s : specs) n += s.preds.size() > 1 ? 1 : 0;
        return n;
    }

    // Hands pending request `s` to stage k arriving at `arrival_ns`; false when it ended instead
    // (a dead stage, a full queue, a full ring).
    bool enqueue_locked(Stripe& st, std::uint32_t s, int k, std::int64_t arrival_ns, const Payload& payload,
                        std::vector<Done>& done, std::vector<Payload>& trash, bool entry) {
        auto& ss = stages_[k];
        auto& sl = ledger_.slot_ref(s);
        if (ss.dead.load(std::memory_order_acquire)) {
            ledger_.finish_locked(st, s, Outcome::kFailed, k, -1, EndKind::kDead, arrival_ns, done, trash, ss.dead_exc);
            return false;
        }
        const Outcome refused = entry ? Outcome::kRejected : Outcome::kDropped;
        const std::int64_t q = stages_.queued_live(k);
        if (q >= spec(k).max_queue) {
            Done& d = ledger_.finish_locked(st, s, refused, k, static_cast<int>(Reason::kRejected), EndKind::kQueueFull,
                                            arrival_ns, done, trash, Payload{});
            d.queued = q;
            d.retry_after_s = stages_.retry_after_s(k);
            return false;
        }
        const std::size_t ku = static_cast<std::size_t>(k);
        ledger_.input_ref(s, k) = payload;
        sl.queued |= std::uint64_t{1} << k;
        sl.stage = k;
        Request r{make_key(sl.rid, s), sl.send_ns, sl.deadline_ns, arrival_ns, sl.tier, 0};
        if (tokens_ != nullptr) {  // every stage's rule may price the LLM stages below by them
            const LiveTokens& t = tokens_->at_locked(s);
            r.in_tokens = t.in;
            r.max_tokens = t.max_tokens;
        }
        if (!spec(k).sched->submit(r)) {
            sl.queued &= ~(std::uint64_t{1} << k);
            to_trash(ledger_.input_ref(s, k), trash);
            Done& d = ledger_.finish_locked(st, s, refused, k, static_cast<int>(Reason::kRejected), EndKind::kRingFull,
                                            arrival_ns, done, trash, Payload{});
            d.retry_after_s = stages_.retry_after_s(k);
            return false;
        }
        st.arrivals[ku].push_back(to_s(arrival_ns));
        if (loads_ != nullptr) loads_->note(k, r);
        return true;
    }

    // Output `out` of stage k for pending request `s`: to the successors (joined where a stage has
    // several predecessors) or, at an exit, the request finishes. May unlock around the hooks.
    void route_locked(std::unique_lock<std::mutex>& lock, Stripe& st, std::uint32_t s, int k, Payload& out,
                      std::int64_t end_ns, std::vector<Done>& done, std::vector<Payload>& trash, Pushed& pushed) {
        auto& sl = ledger_.slot_ref(s);
        const std::uint64_t key = make_key(sl.rid, s);
        const auto& succ = spec(k).successors;
        if (succ.empty()) {
            const Outcome when = end_ns <= sl.deadline_ns ? Outcome::kOnTime : Outcome::kLate;
            if (exits_.size() == 1) {
                ledger_.finish_locked(st, s, when, k, -1, EndKind::kOutput, end_ns, done, trash, out);
                return;
            }
            const std::size_t e = static_cast<std::size_t>(std::find(exits_.begin(), exits_.end(), k) - exits_.begin());
            ledger_.output_ref(s, e) = out;
            if (--sl.sinks_left > 0) return;
            std::vector<Payload> outs(exits_.size());
            for (std::size_t i = 0; i < outs.size(); ++i) {
                outs[i] = std::move(ledger_.output_ref(s, i));
                ledger_.output_ref(s, i) = Payload{};
            }
            lock.unlock();
            Payload result = hooks_.combine(exits_, outs);
            lock.lock();
            if (ledger_.pending_slot_locked(key) == nullptr) {
                trash.push_back(std::move(result));
                return;
            }
            ledger_.finish_locked(st, s, when, k, -1, EndKind::kOutput, end_ns, done, trash, result);
            return;
        }
        for (const int nxt : succ) {
            const std::size_t nu = static_cast<std::size_t>(nxt);
            Payload payload = out;
            if (join_index_[nu] >= 0) {
                const std::size_t j = static_cast<std::size_t>(join_index_[nu]);
                const auto& preds = spec(nxt).preds;
                int& left = ledger_.parts_left_of(s)[j];
                if (left < 0) left = static_cast<int>(preds.size());
                ledger_.part_ref(s, j, k) = out;
                if (--left > 0) continue;
                left = -1;
                std::vector<Payload> parts;
                for (const int p : preds) {
                    parts.push_back(std::move(ledger_.part_ref(s, j, p)));
                    ledger_.part_ref(s, j, p) = Payload{};
                }
                Payload joined, err;
                lock.unlock();
                const bool ok = hooks_.join(nxt, parts, joined, err);
                lock.lock();
                for (auto& p : parts) to_trash(p, trash);
                if (ledger_.pending_slot_locked(key) == nullptr) {  // ended meanwhile (a sibling branch dropped, cancelled)
                    to_trash(joined, trash);
                    to_trash(err, trash);
                    return;
                }
                if (!ok) {
                    ledger_.finish_locked(st, s, Outcome::kFailed, nxt, -1, EndKind::kJoin, end_ns, done, trash, err);
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

private:
    const LiveStageSpec& spec(int k) const { return specs_[static_cast<std::size_t>(k)]; }

    const std::vector<LiveStageSpec>& specs_;
    const std::vector<int>& exits_;
    Hooks hooks_;
    std::vector<int> join_index_;  // stage -> its column among the join stages, -1: not a join
    Book& ledger_;
    StageStates<Payload>& stages_;
    TokenBook<Book::kStripes>* tokens_ = nullptr;
    LlmLoads* loads_ = nullptr;
};

}  // namespace pard::live
