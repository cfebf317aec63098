// pard/llm/stage_join.hpp — an LLM stage's step boundary in its StageScheduler (DESIGN §3.8): who joins
// the running batch. Included at the end of pard/stage_scheduler.hpp (a friend of StageScheduler); it takes
// the stage's batch-forming lock as form_batch does.
//
// The requests joining a worker that runs `running` sequences: at most `slots` of them, and only while
// their KV reservations fit in kv_free tokens (the first that does not fit waits: no skipping ahead).
// Drain and admission as form_batch (vllm's queue cap among them, pard/llm/stage_llm.hpp); pard purges the
// low end, holds the queue to its bound in work (rules/llm_queue_bound.hpp) and judges each request by its
// own cost (rules/llm_deadline.hpp), in deadline order under Policy::llm_lbf, scorpio by its first token
// (rules/scorpio_ttft.hpp), nexus by the running means' cost as d_k, the other rules as at a DNN stage.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "pard/batch.hpp"
#include "pard/estimator.hpp"
#include "pard/llm/stage_llm.hpp"
#include "pard/rules/baseline_drops.hpp"
#include "pard/rules/llm_deadline.hpp"
#include "pard/rules/llm_queue_bound.hpp"
#include "pard/rules/overload.hpp"
#include "pard/rules/scorpio_ttft.hpp"

namespace pard::llm {

template <class IsCancelled>
struct LlmJoin {
    template <class Sched>
    static void form(Sched& s, std::int64_t now_ns, std::int64_t running, std::int64_t slots, std::int64_t kv_free,
                     BatchResult& out, IsCancelled& is_cancelled, const Elsewhere& other = {}) {
        std::lock_guard<std::mutex> guard(s.mu_);
        out.clear();
        s.sync_rank();
        const PublishedTerms t = s.effective(s.terms_.load());
        s.llm_.set_running(running);
        s.drain_locked(t, out.drops, is_cancelled);
        const DropRule rule = s.cfg_.policy.drop;
        auto* cost = s.llm_.cost();
        cost->trim(now_ns);
        const LlmStageSpec& sp = cost->spec();
        // pard: a request that cannot finish here may still finish on another worker of the stage (a less
        // busy one, or one starting up): it is dropped only when it fits nowhere, and left queued for the
        // other worker when it fits there only.
        const auto fits_elsewhere = [&](const Request& r, std::int64_t base) {
            const std::int64_t c = s.llm_.elsewhere_ns(r, now_ns, other);
            return c >= 0 && !rules::llm_drops(r, base, c);
        };
        if (rule == DropRule::kPard) {  // step 2 with the request's own cost at one more running sequence
            const std::int64_t base = now_ns + t.downstream_ns;
            s.heap().drain_min_while([&](const Request& r) {
                                         return rules::llm_drops(r, base, cost->cost_ns(r, running + 1)) && !fits_elsewhere(r, base);
                                     },
                                     [&](Request&& r) { s.discard(out.drops, r, Reason::kInfeasible, is_cancelled); });
        }
        const bool over = rule == DropRule::kPard && over_bound(s, *cost, now_ns, running, t, out, is_cancelled);
        // Policy::llm_lbf: deadline order at the joins, over the bound too (its shed has already run). Every join
        // is judged by the request's own cost, so the request with the least slack that can still finish goes
        // first; under HBF the requests a burst left queued wait behind the newer ones until they expire, just
        // before the workers ordered for the burst (or the slots its long answers hold) would have served them.
        std::vector<Request> left;  // popped, left for another worker
        const bool pop_max = !(rule == DropRule::kPard && s.cfg_.policy.llm_lbf) &&
                             (s.ranked_ || s.current_order() == Order::kHbf || over);
        while (slots > 0 && !s.queue_.empty()) {
            const Request r = s.queue_.pop(pop_max);
            if (is_cancelled(r.id)) {
                out.drops.push_back(Drop{r, Reason::kCancelled});
                continue;
            }
            const std::int64_t need = sp.reservation(r);
            if (need > kv_free) {
                s.heap().push(r);
                break;
            }
            const std::int64_t n = running + 1;
            int v = -1;
            if (rule == DropRule::kPard) {
                if (rules::llm_drops(r, now_ns + t.downstream_ns, cost->cost_ns(r, n))) {
                    if (fits_elsewhere(r, now_ns + t.downstream_ns)) {
                        left.push_back(r);
                        continue;
                    }
                    v = static_cast<int>(Reason::kInfeasible);
                }
            } else if (rule == DropRule::kScorpio) {
                if (rules::scorpio_rejects(r, now_ns, sp.prefill_ns(r.in_tokens))) v = static_cast<int>(Reason::kRejected);
            } else if (rule == DropRule::kNexus) {
                if (!nexus_feasible(r, now_ns, cost->cost_ns(r, n), s.cfg_.budget_fraction)) v = static_cast<int>(Reason::kWindow);
            } else {
                v = rules::baseline_verdict(rule, r, now_ns, s.cfg_.budget_fraction);
            }
            if (v >= 0) {
                out.drops.push_back(Drop{r, static_cast<Reason>(static_cast<std::uint8_t>(v))});
                continue;
            }
            out.batch.push_back(r);
            kv_free -= need;
            --slots;
            ++running;
        }
        for (const Request& r : left) s.heap().push(r);
        s.queue_.end_run();
        out.expected_duration_ns = sp.step_ns(running);
        s.store_sizes();
    }

    // The predicted work (ns) of every request queued (mu_ held).
    template <class Sched>
    static std::int64_t queued_work_ns(Sched& s, const LlmCost& cost) {
        std::int64_t work = 0;
        s.heap().for_each([&](const Request& r) { work += cost.work_ns(r); });
        return work;
    }

    // pard with Policy::reactive (mu_ held): the queue bound in work (rules/llm_queue_bound.hpp). True when the
    // queue is over it: the stage pops HBF now, and (Policy::shed, once the planner's measured duration ratio
    // is in: rules::may_shed) sheds from the low end, reason `shed`, each request that would miss even served
    // after the rest of the queue. Sets the stage's overloaded_now() for the stages above (overload_below).
    template <class Sched>
    static bool over_bound(Sched& s, const LlmCost& cost, std::int64_t now_ns, std::int64_t running,
                           const PublishedTerms& t, BatchResult& out, IsCancelled& is_cancelled) {
        const Policy& p = s.cfg_.policy;
        bool over = false;
        if (p.reactive && !p.keyed_by_arrival() && s.heap().size() > 1) {
            std::int64_t work = queued_work_ns(s, cost);
            const std::int64_t workers = s.llm_.workers();
            const std::int64_t slack_max = s.latest_deadline() - now_ns - t.downstream_ns;
            over = rules::llm_queue_over(s.heap().size(), rules::llm_drain_ns(work, workers), slack_max);
            if (over && p.shed && rules::may_shed(s.terms_.load())) {
                while (s.heap().size() > 1) {
                    const Request r = s.heap().pop_bottom();
                    const std::int64_t w = cost.work_ns(r);
                    if (!rules::llm_last_misses(r, now_ns, rules::llm_drain_ns(work - w, workers), cost.cost_ns(r, running + 1),
                                                t.downstream_ns)) {
                        s.heap().push(r);
                        break;
                    }
                    work -= w;
                    s.discard(out.drops, r, Reason::kShed, is_cancelled);
                }
            }
        }
        s.overloaded_.store(over, std::memory_order_relaxed);
        return over;
    }

    // Runs fn(cost model) under the stage's batch-forming lock: a live worker's step boundary observes the
    // sequences that left and reads the length model there, which the simulator does on its one thread.
    template <class Sched, class Fn>
    static void locked(Sched& s, Fn&& fn) {
        std::lock_guard<std::mutex> guard(s.mu_);
        fn(*s.llm_.cost());
    }
};

}  // namespace pard::llm
