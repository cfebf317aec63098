// pard/live/llm_steps.hpp — LlmSteps: an LLM stage's workers in the live runtime (DESIGN §3.8). The step
// rule is the simulator's (pard/sim/llm_worker.hpp); a real engine's steps take the place of its events.
//
// A worker calls boundary() between two engine steps. At the boundary:
//   1. the step that ended [start, end] is accounted: a step without joiners is one batch row for the
//      planner (size = the sequences that ran, duration = the step, wait 0), its compute charged (each joiner of that step
//      its prefill, prefill(in_tokens) scaled by measured / predicted step time; the decode part split
//      equally), and every sequence the engine reported done leaves: the length model observes its
//      length, its output goes to the successors or it finishes, exactly as LivePipeline::complete does.
//      A joiner the engine refused (its prompt is one the engine cannot take) never ran: it is charged
//      nothing, is not stopped, and ends failed with its own error (EndKind::kExecutor, as a DNN executor's
//      error ends a batch's requests), while the step's other sequences carry on;
//   2. the sequences to stop: those whose request ended meanwhile (cancelled, dropped in a sibling
//      branch, closed) and, under Policy::llm_stop with the pard rule, those that can no longer finish by
//      their deadline (rules/llm_deadline.hpp), ended here dropped with reason `infeasible`, once;
//   3. the joiners from the stage's StageScheduler (llm::LlmJoin): at most max_seqs - running, while
//      their KV reservations fit the stage's kv_tokens minus what the running sequences reserve; their
//      payloads move out of the slots and they count as running from here. Under pard's token-aware rule a
//      request that cannot finish on this worker but can on a less busy one of the stage stays queued for it
//      (llm::Elsewhere, as in the simulator): every worker publishes its running count at its boundaries.
// The worker hands stops and joiners to its engine's next step. A sequence's request stays cancellable
// while it decodes (cancel() ends it at once; the next boundary stops it).
//
// Concurrency. One Worker per thread. The length model is read and written under the stage's
// batch-forming lock (LlmJoin::locked), stripes after it, as everywhere in the live pipeline.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "pard/batch.hpp"
#include "pard/compute_split.hpp"
#include "pard/live/batcher.hpp"
#include "pard/live/ledger.hpp"
#include "pard/live/router.hpp"
#include "pard/live/stage_states.hpp"
#include "pard/live/tokens.hpp"
#include "pard/live/types.hpp"
#include "pard/outcome.hpp"
#include "pard/policy.hpp"
#include "pard/request.hpp"
#include "pard/rules/llm_deadline.hpp"
#include "pard/stage_scheduler.hpp"

namespace pard::live {

template <class Payload, class Handle>
class LlmSteps {
public:
    using Book = Ledger<Payload, Handle>;
    using Done = typename Book::Done;
    using StripeLock = typename Book::StripeLock;
    using Batches = Batcher<Payload, Handle>;
    using Route = Router<Payload, Handle>;

    // One running sequence.
    struct Seq {
        Request r;                    // r.id is the request's key
        std::int32_t generated = 0;   // tokens emitted so far
        std::int32_t stop_at = 1;     // the tokens the engine was asked for (max_new)
        std::int32_t predicted = 1;   // predicted length at its join (calibration)
        std::int64_t reserved = 0;    // KV tokens held
        std::int64_t prefill_ns = 0;  // its predicted prefill while its first step runs (0 after)
    };
    // One worker's engine state as pard sees it.
    struct Worker {
        int stage = 0;
        int workers = 1;  // the stage's workers (the token time's prefill share)
        std::vector<Seq> running;
        std::int64_t kv_used = 0;
        std::vector<double> delays;  // queueing delays (s) of the last boundary's joiners
        std::vector<std::int64_t> charge;
        BatchResult out;
        int slot = -1;          // its place in the stage's roster (-1: past kRosterSize, unpublished)
        bool enrolled = false;  // given a slot at its first boundary
    };
    struct Joiner {
        std::uint64_t key;
        Payload payload;
        std::int32_t in_tokens, max_new;
    };
    struct Finished {
        std::uint64_t key;
        Payload out;
    };
    // A joiner of the step that the engine refused: it never ran and holds nothing in the engine.
    struct Refused {
        std::uint64_t key;
        Payload err;
    };

    LlmSteps(const std::vector<LiveStageSpec>& specs, Book& ledger, TokenBook<Book::kStripes>& tokens,
             StageStates<Payload>& stages, Route& router, Batches& batches, const Clock& clock)
        : specs_(specs), ledger_(ledger), tokens_(tokens), stages_(stages), router_(router), batches_(batches),
          clock_(clock) {
        rosters_.reserve(specs_.size());
        for (std::size_t k = 0; k < specs_.size(); ++k) rosters_.push_back(std::make_unique<Roster>());
    }
    LlmSteps(const LlmSteps&) = delete;
    LlmSteps& operator=(const LlmSteps&) = delete;

    // The boundary after the step that ran w.running over [start_ns, end_ns] (none when w.running is
    // empty); `finished` the sequences the engine reported done in it (with their outputs), `refused` the
    // joiners it refused, or, when `failed`, the step raised `err` and every other running sequence ends
    // failed and is stopped.
    // Fills `stops` (keys) and `joins` for the next step.
    void boundary(Worker& w, std::vector<Finished>& finished, const std::vector<Refused>& refused, bool failed,
                  const Payload& err, std::int64_t start_ns, std::int64_t end_ns, std::vector<std::uint64_t>& stops,
                  std::vector<Joiner>& joins, std::vector<Done>& done) {
        const std::int64_t t0 = clock_.now_ns();
        stops.clear();
        joins.clear();
        std::vector<Payload> trash;
        Pushed pushed;
        if (!w.running.empty()) end_step(w, finished, refused, failed, err, start_ns, end_ns, stops, done, trash, pushed);
        stop_sequences(w, stops, done, trash);
        if (!stages_.stopping()) join(w, joins, done, trash);
        stages_.wake_all(pushed);
        stages_[w.stage].sched_ns.fetch_add(clock_.now_ns() - t0, std::memory_order_relaxed);
    }

    // Blocks until stage k has something queued or stop(); false to stop.
    bool wait(const Worker& w) { return stages_.wait(w.stage); }

private:
    using Ended = typename Batches::Ended;

    // The sequences each worker of a stage runs, published at its step boundaries (-1: no worker there), for
    // the other workers' joins (llm::Elsewhere: a request that does not fit here may fit on a less busy worker).
    static constexpr int kRosterSize = 64;
    struct Roster {
        std::array<std::atomic<std::int64_t>, kRosterSize> running;
        std::atomic<int> enrolled{0};
        Roster() {
            for (auto& n : running) n.store(-1, std::memory_order_relaxed);
        }
    };

    void publish(Worker& w) {
        Roster& ro = *rosters_[static_cast<std::size_t>(w.stage)];
        if (!w.enrolled) {
            w.enrolled = true;
            const int i = ro.enrolled.fetch_add(1, std::memory_order_relaxed);
            w.slot = i < kRosterSize ? i : -1;
        }
        if (w.slot >= 0) ro.running[static_cast<std::size_t>(w.slot)].store(static_cast<std::int64_t>(w.running.size()),
                                                                            std::memory_order_relaxed);
    }

    // What w's join may read of the stage's other workers: the fewest sequences one of them runs.
    llm::Elsewhere others(const Worker& w) const {
        const Roster& ro = *rosters_[static_cast<std::size_t>(w.stage)];
        llm::Elsewhere e;
        const int n = std::min(ro.enrolled.load(std::memory_order_relaxed), kRosterSize);
        for (int i = 0; i < n; ++i) {
            if (i == w.slot) continue;
            const std::int64_t r = ro.running[static_cast<std::size_t>(i)].load(std::memory_order_relaxed);
            if (r >= 0 && (e.least_running < 0 || r < e.least_running)) e.least_running = r;
        }
        return e;
    }
    const LiveStageSpec& spec(int k) const { return specs_[static_cast<std::size_t>(k)]; }

    // Step 1.
    void end_step(Worker& w, std::vector<Finished>& finished, const std::vector<Refused>& refused, bool failed,
                  const Payload& err, std::int64_t start_ns, std::int64_t end_ns, std::vector<std::uint64_t>& stops,
                  std::vector<Done>& done, std::vector<Payload>& trash, Pushed& pushed) {
        const int k = w.stage;
        StageScheduler& sched = *spec(k).sched;
        const std::size_t n = w.running.size();
        std::vector<int> refused_at(n, -1);  // index into `refused`
        std::size_t ran = n;
        for (std::size_t f = 0; f < refused.size(); ++f) {
            for (std::size_t i = 0; i < n; ++i) {
                if (w.running[i].r.id == refused[f].key && refused_at[i] < 0) {
                    refused_at[i] = static_cast<int>(f);
                    --ran;
                }
            }
        }
        const std::int64_t dur = std::max<std::int64_t>(end_ns - start_ns, 0);
        const auto& sp = sched.llm().cost()->spec();
        std::int64_t predicted = ran > 0 ? sp.step_ns(static_cast<std::int64_t>(ran)) : 0;
        for (std::size_t i = 0; i < n; ++i) {
            if (refused_at[i] < 0) predicted += w.running[i].prefill_ns;
        }
        const double factor = predicted > 0 ? static_cast<double>(dur) / static_cast<double>(predicted) : 1.0;
        w.charge.assign(n, 0);
        std::int64_t prefill = 0;
        std::int64_t decode = 0;
        if (ran > 0) {  // a step whose every sequence was refused ran nothing: nothing to charge or observe
            for (std::size_t i = 0; i < n; ++i) {
                if (w.running[i].prefill_ns == 0 || refused_at[i] >= 0) continue;
                const auto p = std::min(dur - prefill,
                                        static_cast<std::int64_t>(std::llround(static_cast<double>(w.running[i].prefill_ns) * factor)));
                w.charge[i] = p;
                prefill += p;
            }
            decode = dur - prefill;
            const BatchShares shares(decode, ran);
            for (std::size_t i = 0, j = 0; i < n; ++i) {
                if (refused_at[i] < 0) w.charge[i] += shares(j++);
            }
        }
        // Only a step without joiners measures decode(n): in one with joiners the split above assumes both
        // parts missed their prediction by the same factor, and a real engine's prefill grows faster than
        // its linear profile, so the decode correction and the drift check would read prefill's error.
        if (prefill == 0 && decode > 0) {
            sched.observe_batch(static_cast<std::int64_t>(ran), decode);
            auto& ss = stages_[k];
            std::lock_guard<std::mutex> lock(ss.mu);
            stages_.log_batch_locked(k, to_s(start_ns), to_s(decode), static_cast<std::int64_t>(ran), 0.0);
        }
        // which sequences leave, and what the length model learns from them
        std::vector<int> leaves(n, -1);  // index into `finished`
        for (std::size_t f = 0; f < finished.size(); ++f) {
            for (std::size_t i = 0; i < n; ++i) {
                if (w.running[i].r.id == finished[f].key) leaves[i] = static_cast<int>(f);
            }
        }
        for (Seq& q : w.running) ++q.generated;
        llm::LlmJoin<Ended>::locked(sched, [&](llm::LlmCost& cost) {
            cost.observe_step(start_ns, prefill, w.workers);
            for (std::size_t i = 0; i < n; ++i) {
                if (leaves[i] < 0 || failed || refused_at[i] >= 0) continue;
                cost.observe(w.running[i].r, w.running[i].generated);
                cost.record_calibration(w.running[i].predicted, w.running[i].generated);
            }
        });
        std::size_t keep = 0;
        StripeLock cur;
        for (std::size_t i = 0; i < n; ++i) {
            Seq& q = w.running[i];
            const std::uint64_t key = q.r.id;
            auto& st = cur.at(ledger_.stripe(key >> kSlotBits));
            auto* sl = ledger_.pending_slot_locked(key);
            const bool rejected = refused_at[i] >= 0;
            const bool leaving = failed || rejected || leaves[i] >= 0;
            // the engine's state of a failed step is not pard's to trust; a refused joiner it never held
            if (failed && !rejected) stops.push_back(key);
            if (sl == nullptr) {  // ended during the step: its share is wasted
                st.split.charge_ended(static_cast<std::size_t>(k), w.charge[i], Outcome::kDropped);
            } else if (rejected) {
                ledger_.finish_locked(st, static_cast<std::uint32_t>(key & kSlotMask), Outcome::kFailed, k, -1,
                                      EndKind::kExecutor, end_ns, done, trash,
                                      refused[static_cast<std::size_t>(refused_at[i])].err);
            } else {
                const auto s = static_cast<std::uint32_t>(key & kSlotMask);
                ledger_.charge_locked(st, sl->rid, to_s(w.charge[i]));
                st.split.charge_pending(static_cast<std::size_t>(k), w.charge[i], ledger_.tally_of(s));
                if (failed) {
                    ledger_.finish_locked(st, s, Outcome::kFailed, k, -1, EndKind::kExecutor, end_ns, done, trash, err);
                } else if (leaving) {
                    router_.route_locked(cur.lock, st, s, k, finished[static_cast<std::size_t>(leaves[i])].out, end_ns,
                                         done, trash, pushed);
                }
            }
            if (leaving) {
                w.kv_used -= q.reserved;
                continue;
            }
            q.prefill_ns = 0;
            w.running[keep++] = q;
        }
        cur.release();
        w.running.resize(keep);
    }

    // Step 2: sequences whose request ended, and (Policy::llm_stop) those that can no longer finish in time,
    // judged at the decode step alone, decode(n), as the simulator does.
    void stop_sequences(Worker& w, std::vector<std::uint64_t>& stops, std::vector<Done>& done,
                        std::vector<Payload>& trash) {
        if (w.running.empty()) return;
        const int k = w.stage;
        StageScheduler& sched = *spec(k).sched;
        const Policy& pol = sched.config().policy;
        const bool judge = pol.llm_stop && pol.drop == DropRule::kPard;
        const std::int64_t now = clock_.now_ns();
        llm::LlmJoin<Ended>::locked(sched, [&](llm::LlmCost& cost) {
            const std::int64_t down = judge ? sched.effective_terms().downstream_ns : 0;
            const std::int64_t step = cost.spec().step_ns(static_cast<std::int64_t>(w.running.size()));
            std::size_t keep = 0;
            StripeLock cur;
            for (std::size_t i = 0; i < w.running.size(); ++i) {
                const Seq& q = w.running[i];
                auto& st = cur.at(ledger_.stripe(q.r.id >> kSlotBits));
                auto* sl = ledger_.pending_slot_locked(q.r.id);
                bool stop = sl == nullptr;
                if (!stop && judge) {
                    const std::int32_t left = cost.predicted_len(q.r, q.generated) - q.generated;
                    if (rules::llm_decode_stops(q.r, now, left, step, down)) {
                        ledger_.finish_locked(st, static_cast<std::uint32_t>(q.r.id & kSlotMask), Outcome::kDropped, k,
                                              static_cast<int>(Reason::kInfeasible), EndKind::kPolicy, now, done, trash,
                                              Payload{});
                        stop = true;
                    }
                }
                if (stop) {
                    w.kv_used -= q.reserved;
                    stops.push_back(q.r.id);
                } else {
                    w.running[keep++] = q;
                }
            }
            cur.release();
            w.running.resize(keep);
        });
    }

    // Step 3.
    void join(Worker& w, std::vector<Joiner>& joins, std::vector<Done>& done, std::vector<Payload>& trash) {
        const int k = w.stage;
        StageScheduler& sched = *spec(k).sched;
        const auto& sp = sched.llm().cost()->spec();
        const auto running = static_cast<std::int64_t>(w.running.size());
        const std::int64_t slots = sp.max_seqs - running;
        publish(w);
        if (slots <= 0 || stages_[k].pending.load() <= 0) return;
        const std::int64_t now = clock_.now_ns();
        Ended ended{&ledger_};
        const Policy& pol = sched.config().policy;
        const llm::Elsewhere other = pol.drop == DropRule::kPard && pol.llm_tokens ? others(w) : llm::Elsewhere{};
        llm::LlmJoin<Ended>::form(sched, now, running, slots, sp.kv_tokens - w.kv_used, w.out, ended, other);
        std::int64_t ghosts = batches_.end_drops(k, w.out.drops, now, done, trash);
        const std::uint64_t bit = std::uint64_t{1} << k;
        const std::size_t first = w.running.size();
        w.delays.clear();
        StripeLock cur;
        for (const Request& r : w.out.batch) {
            cur.at(ledger_.stripe(r.id >> kSlotBits));  // r's stripe stays locked for its slot's reads below
            auto* sl = ledger_.pending_slot_locked(r.id);
            if (sl == nullptr) {
                ++ghosts;
                continue;
            }
            sl->queued &= ~bit;
            const auto s = static_cast<std::uint32_t>(r.id & kSlotMask);
            Payload& in = ledger_.input_ref(s, k);
            const std::int32_t max_new = tokens_.at_locked(s).max_new;
            Seq q;
            q.r = r;
            q.stop_at = max_new > 0 ? std::min(max_new, sp.cap(r)) : sp.cap(r);
            q.reserved = sp.reservation(r);
            q.prefill_ns = sp.prefill_ns(r.in_tokens);
            w.kv_used += q.reserved;
            w.running.push_back(q);
            joins.push_back(Joiner{r.id, std::move(in), r.in_tokens, q.stop_at});
            in = Payload{};
            w.delays.push_back(to_s(now - r.arrival_ns));
        }
        cur.release();
        if (w.running.size() > first) {
            llm::LlmJoin<Ended>::locked(sched, [&](llm::LlmCost& cost) {
                for (std::size_t i = first; i < w.running.size(); ++i) w.running[i].predicted = cost.predicted_len(w.running[i].r);
            });
        }
        publish(w);
        batches_.settle_taken(k, static_cast<std::int64_t>(w.out.batch.size() + w.out.drops.size()), ghosts, now, w.delays, 0);
    }

    const std::vector<LiveStageSpec>& specs_;
    Book& ledger_;
    TokenBook<Book::kStripes>& tokens_;
    StageStates<Payload>& stages_;
    Route& router_;
    Batches& batches_;
    const Clock& clock_;
    std::vector<std::unique_ptr<Roster>> rosters_;  // one per stage
};

}  // namespace pard::live
