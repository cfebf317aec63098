// pard/stage_scheduler.hpp — StageScheduler: one stage's queue mechanism (DESIGN §3.1–3.4).
//
// Requests reach the stage through a bounded lock-free MPMC ring (a full ring refuses the submit:
// back-pressure, never a silent loss). A worker forming a batch takes the stage's short batch-forming
// lock, drains the ring into the stage's min-max heap (one per service tier for a tiered policy),
// purges the low-budget end, and pops its batch, applying the policy's drop rule to each request. The
// planner's terms are read once per batch from a SnapshotCell, without a lock. The heap key is the
// arrival (FCFS), the deadline, or on a parallel DAG branch in overload a shared rank of the id.
//
// form_batch(now, t_e) runs, in order: 1 drain (admission: queue bound, admitted share, Dagor's
// throttle); 1b the floor when the busy forecast refutes itself; 2 the purge of the low end (pard);
// 2b the overload test and shed (reactive); 2c pacing; 3 the batch size b and d_k(b); 4 the pops,
// each judged by the drop rule (estimator.hpp's verdicts, the nexus window; at an entry stage also the
// virtual queue of the bottleneck below, rules/virtual_queue.hpp, whose bottleneck pops lowest budget
// first while paced so). Each decision that is a
// rule (when to react, how much to keep, which term to budget) is a small function in pard/rules/.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "pard/batch.hpp"
#include "pard/estimator.hpp"
#include "pard/policy.hpp"
#include "pard/profile.hpp"
#include "pard/request.hpp"
#include "pard/rules/baseline_drops.hpp"
#include "pard/rules/coherent_rank.hpp"
#include "pard/rules/duration_scale.hpp"
#include "pard/rules/floor.hpp"
#include "pard/rules/nexus_window.hpp"
#include "pard/rules/order.hpp"
#include "pard/rules/overload.hpp"
#include "pard/rules/overload_upper.hpp"
#include "pard/rules/pacing.hpp"
#include "pard/rules/queue_lag.hpp"
#include "pard/rules/tier_admission.hpp"
#include "pard/rules/tier_thresholds.hpp"
#include "pard/rules/virtual_queue.hpp"
#include "pard/llm/stage_llm.hpp"
#include "pard/snapshot.hpp"
#include "pard/stage_admission.hpp"
#include "pard/stage_config.hpp"
#include "pard/stage_graph.hpp"
#include "pard/stage_queue.hpp"

namespace pard {

class StageScheduler {
public:
    explicit StageScheduler(StageConfig cfg)
        : cfg_(validated_stage_config(std::move(cfg))),
          weights_(cfg_.policy.tiered ? cfg_.tier_weights : std::vector<double>{}),
          tiers_(weights_.empty() ? 1 : weights_.size()),
          by_tier_low_(tiers_ > 1 && !cfg_.policy.keyed_by_arrival()),
          queue_(cfg_.ring_capacity, StageKeyLess{cfg_.policy.keyed_by_arrival()}, weights_, by_tier_low_),
          admission_(cfg_.policy, cfg_.entry, tiers_, cfg_.tier_weights),
          tier_thr_(tiers_),
          purge_thr_(tiers_),
          outranks_(rules::outranking_tiers(tiers_ > 1 ? cfg_.tier_weights : std::vector<double>{})),
          order_(cfg_.policy.order == Order::kAdaptive ? Order::kLbf : cfg_.policy.order) {
        scratch_.reserve(static_cast<std::size_t>(cfg_.max_batch) * 2);
        if (cfg_.llm) llm_.build(cfg_.llm_spec, cfg_.policy, static_cast<int>(tiers_));
    }
    StageScheduler(const StageScheduler&) = delete;
    StageScheduler& operator=(const StageScheduler&) = delete;

    // Any thread. False when the ingress ring is full (back-pressure): the caller must reject.
    bool submit(const Request& r) noexcept { return queue_.submit(r); }

    // The single-threaded owner's submit (the simulator): as submit(), with the same capacity, into a
    // plain buffer that the next drain empties before the ring, in submission order, without the ring's
    // atomics. Not for use while another thread submits or forms batches.
    bool submit_local(const Request& r) { return queue_.submit_local(r); }

    // Planner thread (any one thread at a time). Publishes the terms and steps the adaptive order.
    void publish(const PublishedTerms& t) {
        std::lock_guard<std::mutex> guard(publish_mu_);
        if (cfg_.policy.order == Order::kAdaptive) {
            order_.store(rules::adaptive_order(order_.load(std::memory_order_relaxed), t.mu, t.eps),
                         std::memory_order_relaxed);
        }
        if (order_.load(std::memory_order_relaxed) != Order::kHbf) calm_publishes_.fetch_add(1, std::memory_order_relaxed);
        terms_.store(t);
    }

    [[nodiscard]] PublishedTerms terms() const noexcept { return terms_.load(); }

    // The stages below this one (every stage reachable through its successors: stages_below), read by
    // the pop rule's cross-stage rules. Set once, before any thread forms a batch; they must outlive it.
    void set_below(std::vector<const StageScheduler*> below) {
        below_ = std::move(below);
        lag_paths_.clear();  // below_lag_ns plans again
    }
    [[nodiscard]] const std::vector<const StageScheduler*>& below() const noexcept { return below_; }

    // Whether this stage lies on one of several parallel DAG branches (parallel_branches): where
    // Policy::coherent_rank applies. Set once, before any thread forms a batch.
    void set_parallel(bool parallel) noexcept { parallel_ = parallel; }
    [[nodiscard]] bool parallel() const noexcept { return parallel_; }

    // When the batches this stage has formed are expected to end (the latest t_e + d_k(b); ns on the
    // scheduler's clock). Any thread; relaxed.
    [[nodiscard]] std::int64_t busy_until_ns() const noexcept { return busy_until_ns_.load(std::memory_order_relaxed); }

    // Whether this stage's overload test held at its last batch formation and it still holds a request
    // queued (a stage that went idle forms no batch to clear the flag). Any thread; best effort.
    [[nodiscard]] bool overloaded_now() const noexcept {
        return overloaded_.load(std::memory_order_relaxed) && queued() > 0;
    }

    // rules::queue_lag_ns of this stage for a request reaching it transit_ns from now (ns, >= 0): 0 while
    // the stage is unmeasured (its rate would be the profile's word alone) or its rate unknown. With
    // min_weight > 0 only the requests of tiers weighing at least that are ahead (queued_ahead).
    // What the stages above read under Policy::live_queues. Any thread; best effort (relaxed loads).
    [[nodiscard]] std::int64_t queue_lag_ns(std::int64_t transit_ns = 0, double min_weight = 0.0) const noexcept {
        const PublishedTerms published = terms_.load();
        if (unmeasured(published)) return 0;
        const PublishedTerms t = effective(published);
        if (!(t.service_rate > 0.0)) return 0;
        return rules::queue_lag_ns(queued_ahead(min_weight), t.service_rate, t.queue_delay_ns, transit_ns);
    }

    // Any worker thread, once a batch of b requests has run for measured_ns: adds it to the stage's own
    // measured and profiled sums (own_duration_scale). Lock-free: two relaxed additions per batch.
    void observe_batch(std::int64_t b, std::int64_t measured_ns) noexcept {
        if (b < 1 || measured_ns < 0) return;
        vq_.flight.finished(b);
        if (b > cfg_.max_batch) b = cfg_.max_batch;
        measured_sum_ns_.fetch_add(measured_ns, std::memory_order_relaxed);
        profiled_sum_ns_.fetch_add(cfg_.profile.duration_ns(b), std::memory_order_relaxed);
    }

    friend class rules::VirtualQueueGate;  // reads the stages below: their below_ and in-flight counts
    template <class> friend struct llm::LlmJoin;  // an LLM stage's step boundary
    // rules::own_duration_scale over every batch this stage has run. The two sums are read one after the
    // other: a batch observed in between shifts the ratio by at most that one batch.
    [[nodiscard]] double own_duration_scale() const noexcept {
        return rules::own_duration_scale(measured_sum_ns_.load(std::memory_order_relaxed),
                                         profiled_sum_ns_.load(std::memory_order_relaxed));
    }

    // The terms the hot path uses: the published ones, or while their duration_scale is 0 (nothing
    // measured yet) rules::with_own_scale of them.
    [[nodiscard]] PublishedTerms effective_terms() const noexcept { return effective(terms_.load()); }

    // The order the next batch is popped in: fcfs, lbf or hbf (never adaptive).
    [[nodiscard]] Order current_order() const noexcept { return order_.load(std::memory_order_relaxed); }

    // Requests waiting (heap + ring); best effort while other threads submit or form batches.
    [[nodiscard]] std::size_t queued() const noexcept { return queue_.queued(); }

    [[nodiscard]] const StageConfig& config() const noexcept { return cfg_; }

    // The earliest deadline in the heap (kNoDeadline when empty, or under the rank key): the request an
    // admission pushes furthest back while the stage pops HBF (pard/door.hpp). Best effort, relaxed.
    static constexpr std::int64_t kNoDeadline = StageQueue::kNoDeadline;
    [[nodiscard]] std::int64_t earliest_queued_deadline_ns() const noexcept { return queue_.earliest_queued_deadline_ns(); }

    // queued(), less the heap's requests of tiers weighing under min_weight while this stage pops the
    // highest-weight tier first (HBF, and LBF unless keyed by arrival). Best effort (relaxed loads).
    [[nodiscard]] std::size_t queued_ahead(double min_weight) const noexcept {
        return queue_.queued_ahead(min_weight, by_tier_low_ || current_order() == Order::kHbf);
    }
    // d_k(b) as this stage expects it now (the profile's, scaled by the effective duration_scale): what
    // a worker that pre-collects its next batch takes as the running batch's end (t_e).
    [[nodiscard]] std::int64_t expected_duration_ns(std::int64_t b) const noexcept {
        return rules::scaled(cfg_.profile.duration_ns(b), effective_terms().duration_scale);
    }

    // Moves everything in the ring into the heap (with step 1's admission); admission drops are
    // appended to `drops`. The simulator calls this when a submit finds the ring full.
    template <class IsCancelled = NeverCancelled>
    void drain(std::vector<Drop>& drops, IsCancelled&& is_cancelled = IsCancelled{}) {
        std::lock_guard<std::mutex> guard(mu_);
        sync_rank();
        const PublishedTerms t = effective_terms();
        drain_locked(t, drops, is_cancelled);
        store_sizes();
    }

    // Forms the next batch at time now_ns for a batch expected to start at t_e_ns (>= now_ns): steps
    // 1–4 of the header comment. `out` is cleared first.
    template <class IsCancelled = NeverCancelled>
    void form_batch(std::int64_t now_ns, std::int64_t t_e_ns, BatchResult& out,
                    IsCancelled&& is_cancelled = IsCancelled{}) {
        if (t_e_ns < now_ns) t_e_ns = now_ns;  // a batch cannot start in the past (as purge)
        std::lock_guard<std::mutex> guard(mu_);
        out.clear();
        sync_rank();
        const PublishedTerms published = terms_.load();
        PublishedTerms t = effective(published);
        const DropRule rule = cfg_.policy.drop;
        if (run_eligible(t)) {
            queue_.take_run();  // step 1 without the heap (StageQueue's sorted run)
        } else {
            drain_locked(t, out.drops, is_cancelled);
        }
        if (rule == DropRule::kPard) floor_if_self_refuting(t, t_e_ns);  // step 1b
        const Profile& prof = cfg_.profile;
        const double scale = t.duration_scale;
        if (rule == DropRule::kPard) purge_low_end(t, t_e_ns, out.drops, is_cancelled);  // step 2

        const std::size_t max_b = static_cast<std::size_t>(cfg_.max_batch);
        const std::size_t queued_now = queue_.size();
        std::size_t b = queued_now < max_b ? queued_now : max_b;  // step 3
        if (b == 0) {
            store_sizes();
            overloaded_.store(false, std::memory_order_relaxed);
            return;
        }
        std::int64_t d = rules::scaled(prof.duration_ns(static_cast<std::int64_t>(b)), scale);
        bool pop_max = ranked_ || (current_order() == Order::kHbf && !vq_.paced());  // by rank: top ranks first
        std::size_t limit = max_b;  // step 2c lowers it
        const bool pace = rules::paced(cfg_.policy.pace, t);
        const bool overloaded = rule == DropRule::kPard && cfg_.policy.reactive && !cfg_.policy.keyed_by_arrival() &&
                                t.service_rate > 0.0 &&
                                react_to_overload(t, t_e_ns, d, pace, rules::may_shed(published), out, is_cancelled);
        overloaded_.store(overloaded, std::memory_order_relaxed);
        if (overloaded) {  // step 2b: HBF at once; 2c: a paced batch
            pop_max = ranked_ || !vq_.paced();  // unless an entry's virtual queue paces it (rules/virtual_queue.hpp)
            b = heap().size() < max_b ? heap().size() : max_b;
            if (pace) b = limit = rules::paced_batch(prof, cfg_.max_batch, t, b);
            d = rules::scaled(prof.duration_ns(static_cast<std::int64_t>(b)), scale);
        }
        out.expected_duration_ns = d;

        if (rule == DropRule::kNone) {  // step 4: the pops, each judged by the policy's drop rule
            pop_loop(out, pop_max, is_cancelled, [](const Request&) { return -1; });
        } else if (rule == DropRule::kPard) {
            pard_pops(t, now_ns, t_e_ns, d, overloaded, pop_max, limit, out, is_cancelled);
        } else if (rule == DropRule::kNexus) {
            rules::nexus_window(
                out, scratch_, b, t_e_ns, d, cfg_.budget_fraction, [this, pop_max] { return queue_.pop(pop_max); },
                [this] { return heap().empty(); }, is_cancelled, [this](const Request& r) { heap().push(r); });
        } else {
            const double f = cfg_.budget_fraction;
            pop_loop(out, pop_max, is_cancelled,
                     [rule, t_e_ns, f](const Request& r) { return rules::baseline_verdict(rule, r, t_e_ns, f); });
        }
        queue_.end_run();
        vq_.flight.taken(out.batch.size());
        if (!out.batch.empty() && t_e_ns + out.expected_duration_ns > busy_until_ns_.load(std::memory_order_relaxed)) {
            busy_until_ns_.store(t_e_ns + out.expected_duration_ns, std::memory_order_relaxed);  // under mu_
        }
        store_sizes();
    }

    // Steps 1 and 2 alone, no batch formed: for a stage whose workers are all busy, so that a request
    // that became infeasible is dropped at once rather than when the next batch forms; t_e_ns is the
    // earliest a worker can start a batch. Rules without a low-end purge: nothing, not even the drain.
    template <class IsCancelled = NeverCancelled>
    void purge(std::int64_t now_ns, std::int64_t t_e_ns, std::vector<Drop>& drops,
               IsCancelled&& is_cancelled = IsCancelled{}) {
        if (cfg_.policy.drop != DropRule::kPard) return;
        if (t_e_ns < now_ns) t_e_ns = now_ns;
        std::lock_guard<std::mutex> guard(mu_);
        sync_rank();
        const PublishedTerms t = effective_terms();
        drain_locked(t, drops, is_cancelled);
        purge_low_end(t, t_e_ns, drops, is_cancelled);
        store_sizes();
    }

    // LLM stages (pard/llm/stage_llm.hpp); an LLM stage's joins at a step boundary: llm::LlmJoin::form.
    [[nodiscard]] llm::StageLlm& llm() noexcept { return llm_; }

private:
    // Neither the planner nor this stage has measured a batch yet.
    [[nodiscard]] bool unmeasured(const PublishedTerms& published) const noexcept {
        return published.duration_scale == 0.0 && profiled_sum_ns_.load(std::memory_order_relaxed) == 0;
    }

    [[nodiscard]] PublishedTerms effective(PublishedTerms t) const noexcept {
        return t.duration_scale > 0.0 ? t : rules::with_own_scale(t, own_duration_scale());
    }

    // Step 2 (mu_ held): drop the heap's min while even a batch of one starting at t_e_ns misses; on a
    // tiered stage each tier's low end with its own term. d_k(1) <= d_k(b): never what the pop would keep.
    template <class IsCancelled>
    void purge_low_end(const PublishedTerms& t, std::int64_t t_e_ns, std::vector<Drop>& drops,
                       IsCancelled& is_cancelled) {
        const std::int64_t d1 = rules::scaled(cfg_.profile.duration_ns(1), t.duration_scale);
        for (std::size_t k = 0; k < purge_thr_.size(); ++k) {
            purge_thr_[k] = pard_threshold(t_e_ns, d1, rules::tier_downstream_ns(t, outranks(k)));
        }
        heap().drain_min_while([this](const Request& r) { return pard_drops(r, purge_thr_[heap().index(r.tier)] + llm_.below_ns(r)); },
                               [&](Request&& r) { discard(drops, r, Reason::kInfeasible, is_cancelled); });
    }

    // Step 4 under the pard rule: the published term, raised while overloaded (rules/overload_upper.hpp),
    // at least the live queues below (rules/queue_lag.hpp), per tier on a tiered stage (tier_thresholds).
    template <class IsCancelled>
    void pard_pops(const PublishedTerms& t, std::int64_t now_ns, std::int64_t t_e_ns, std::int64_t d, bool overloaded,
                   bool pop_max, std::size_t limit, BatchResult& out, IsCancelled& is_cancelled) {
        const bool raise = (overloaded || rules::below_signals(cfg_.policy.overload_below, below_)) && raise_fits(t, t_e_ns, d);
        const std::int64_t down = rules::pop_downstream_ns(t, raise);
        const std::int64_t transit = t_e_ns - now_ns + d;
        vq_.begin(cfg_.policy.virtual_queue && cfg_.entry, t.service_rate, below_, now_ns, tiers_ > 1 ? cfg_.tier_weights : rules::kOneTier);
        if (cfg_.policy.live_queues && tiers_ > 1) {
            for (std::size_t k = 0; k < tier_thr_.size(); ++k) {
                const std::int64_t pub = rules::tier_downstream_ns(t, outranks(k));
                const std::int64_t live = pub + below_lag_ns(transit, cfg_.tier_weights[k]);
                const std::int64_t base = outranks(k) ? pub : down;  // an outranking tier: no busy or overload term
                tier_thr_[k] = pard_threshold(t_e_ns, d, live > base ? live : base);
            }
            pop_loop(out, pop_max, is_cancelled, [&](const Request& r) {
                return vq_.verdict(pard_drops(r, tier_thr_[heap().index(r.tier)] + llm_.below_ns(r)), r, t_e_ns + d, now_ns);
            }, limit);
            return;
        }
        std::int64_t best = down;
        if (cfg_.policy.live_queues) {  // the larger of two estimates of the same downstream latency
            const std::int64_t live = t.downstream_ns + below_lag_ns(transit);
            best = live > best ? live : best;
        }
        const std::int64_t thr = pard_threshold(t_e_ns, d, best);
        pop_loop(out, pop_max, is_cancelled, [&](const Request& r) {
            return vq_.verdict(pard_drops(r, thr + llm_.below_ns(r)), r, t_e_ns + d, now_ns);
        }, limit);
    }

    template <class IsCancelled>
    static void discard(std::vector<Drop>& drops, const Request& r, Reason why, IsCancelled& is_cancelled) {
        drops.push_back(Drop{r, is_cancelled(r.id) ? Reason::kCancelled : why});
    }

    // Step 1b (rules/floor.hpp): the busy term gives way to the published floor when it refutes itself.
    void floor_if_self_refuting(PublishedTerms& t, std::int64_t t_e_ns) const noexcept {
        if (!rules::floor_applies(t) || heap().empty()) return;
        const std::int64_t d1 = rules::scaled(cfg_.profile.duration_ns(1), t.duration_scale);
        if (self_refuting(t.downstream_ns, t_e_ns, d1)) t.downstream_ns = t.floor_downstream_ns;
    }

    // Whether step 2b's raised term leaves the request with the most slack feasible (rules/overload_upper.hpp).
    [[nodiscard]] bool raise_fits(const PublishedTerms& t, std::int64_t t_e_ns, std::int64_t d) const noexcept {
        return !rules::raises(t) || !self_refuting(t.overload_downstream_ns, t_e_ns, d);
    }

    [[nodiscard]] bool self_refuting(std::int64_t term_ns, std::int64_t t_e_ns, std::int64_t d) const noexcept {
        return rules::refutes_itself(pard_threshold(t_e_ns, d, term_ns), latest_deadline()) &&
               rules::below_idle(below_, t_e_ns + d);
    }

    // After every heap change (mu_ held): per tier only where stages above read them (live_queues).
    void store_sizes() noexcept { queue_.store_sizes(ranked_, cfg_.policy.live_queues); }
    [[nodiscard]] TieredQueue<StageKeyLess>& heap() noexcept { return queue_.heap(); }
    [[nodiscard]] const TieredQueue<StageKeyLess>& heap() const noexcept { return queue_.heap(); }

    [[nodiscard]] bool outranks(std::size_t k) const noexcept { return k < outranks_.size() && outranks_[k]; }

    // Policy::live_queues (mu_ held): the longest summed queue_lag_ns over the paths below this stage.
    [[nodiscard]] std::int64_t below_lag_ns(std::int64_t transit_ns, double min_weight = 0.0) {
        return cfg_.policy.live_queues ? rules::longest_below_lag(lag_paths_, below_, transit_ns, min_weight) : 0;
    }

    // Step 2b (rules/overload.hpp): true when the queue cannot drain within the largest slack; then sheds,
    // from the bottom (reason `shed`), what cannot even leave this stage in time (its own finish, not the
    // downstream estimate a burst inflates), keeping at least one batch.
    template <class IsCancelled>
    bool react_to_overload(const PublishedTerms& t, std::int64_t t_e_ns, std::int64_t d, bool pace, bool may_shed,
                           BatchResult& out, IsCancelled& is_cancelled) {
        const double n = static_cast<double>(heap().size());
        const std::int64_t latest = latest_deadline();
        const double slack_max_s = static_cast<double>(latest - pard_threshold(t_e_ns, d, t.downstream_ns)) * 1e-9;
        if (!rules::overload_holds(n, t.service_rate, slack_max_s)) return false;
        if (!cfg_.policy.shed || !may_shed) return true;
        const double local_s = static_cast<double>(latest - t_e_ns - d) * 1e-9;
        const double rate = rules::shed_rate(pace, t);
        const auto keep = static_cast<std::size_t>(rules::startable(cfg_.max_batch, rate, local_s > 0.0 ? local_s : 0.0));
        while (heap().size() > keep) discard(out.drops, heap().pop_bottom(), Reason::kShed, is_cancelled);
        return true;
    }

    // Coherent rank (mu_ held; rules/coherent_rank.hpp): re-keys the queue, in O(n), when a branch stage
    // enters or leaves overload.
    void sync_rank() {
        if (!parallel_ || !cfg_.policy.coherent_rank) return;
        const std::uint64_t calm = calm_publishes_.load(std::memory_order_relaxed);
        const bool want = rules::want_ranked(ranked_, current_order() == Order::kHbf,
                                             overloaded_.load(std::memory_order_relaxed), calm, ranked_at_calm_);
        if (want == ranked_) return;
        ranked_ = want;
        ranked_at_calm_ = calm;
        queue_.rekey(StageKeyLess{cfg_.policy.keyed_by_arrival(), want});
    }

    [[nodiscard]] std::int64_t latest_deadline() const noexcept { return queue_.latest_deadline(ranked_); }

    // Step 1 (mu_ held): every request waiting is pushed or dropped by the stage's admission.
    template <class IsCancelled>
    void drain_locked(const PublishedTerms& t, std::vector<Drop>& drops, IsCancelled& is_cancelled) {
        admission_.begin(t);
        std::int64_t waiting_tokens = llm_.vllm_waiting_tokens(cfg_.policy.drop, heap());
        queue_.drain([&](const Request& r) {
            int v = admission_.verdict(r, heap().size());
            if (v < 0 && llm_.vllm_rejects(cfg_.policy.drop, r, heap().size(), waiting_tokens)) v = static_cast<int>(Reason::kRejected);
            if (v < 0) {
                waiting_tokens += r.in_tokens;
                queue_.push(r);
            } else {
                discard(drops, r, static_cast<Reason>(static_cast<std::uint8_t>(v)), is_cancelled);
            }
        });
    }

    // The sorted run (StageQueue) takes a short local queue when admission pushes every request, the
    // queue has one tier, and the rule has no purge or overload test and pops one at a time.
    [[nodiscard]] bool run_eligible(const PublishedTerms& t) const noexcept {
        const DropRule rule = cfg_.policy.drop;
        if (!queue_.run_ready() || rule == DropRule::kPard || rule == DropRule::kNexus || tiers_ > 1) return false;
        return admission_.admits_all(t);
    }

    template <class IsCancelled, class Verdict>
    void pop_loop(BatchResult& out, bool pop_max, IsCancelled& is_cancelled, Verdict verdict,
                  std::size_t limit = static_cast<std::size_t>(-1)) {
        const auto max_b = static_cast<std::size_t>(cfg_.max_batch);
        queue_.pop_loop(out, pop_max, limit < max_b ? limit : max_b, is_cancelled, verdict);
    }

    const StageConfig cfg_;
    const std::vector<double> weights_;  // the queue's tier weights (empty: one tier)
    const std::size_t tiers_;
    const bool by_tier_low_;             // LBF pops the top tier's lowest budget first (StageQueue::pop)
    std::mutex mu_;                      // the batch-forming lock: guards queue_, admission_ and scratch
    StageQueue queue_;
    StageAdmission admission_;
    std::vector<Request> scratch_;
    std::vector<std::int64_t> tier_thr_;   // pard_pops' per-tier thresholds (mu_)
    std::vector<std::int64_t> purge_thr_;  // purge_low_end's per-tier thresholds (mu_)
    std::vector<bool> outranks_;           // per tier: some tier weighs less
    std::atomic<bool> overloaded_{false};  // step 2b's test at the last batch (overloaded_now)
    std::atomic<std::int64_t> busy_until_ns_{std::numeric_limits<std::int64_t>::min()};  // busy_until_ns()
    bool parallel_ = false;                         // set_parallel: on a parallel DAG branch
    bool ranked_ = false;                           // the queue is keyed by rank now (sync_rank; mu_)
    std::uint64_t ranked_at_calm_ = 0;              // calm_publishes_ when ranked_ last changed (mu_)
    std::atomic<std::uint64_t> calm_publishes_{0};  // publishes that left the order other than HBF
    std::vector<const StageScheduler*> below_;      // set_below: the stages below
    rules::LongestLagPath lag_paths_;               // below_lag_ns's plan over below_ (mu_)
    rules::VirtualQueueGate vq_;                    // Policy::virtual_queue at an entry (mu_); in_flight
    std::atomic<std::int64_t> measured_sum_ns_{0};  // observe_batch: measured batch ns, ever
    std::atomic<std::int64_t> profiled_sum_ns_{0};  // ... and the profile's d_k(b) for the same batches
    llm::StageLlm llm_;  // llm()
    std::atomic<Order> order_;
    std::mutex publish_mu_;  // serialises publishers (hysteresis step + snapshot store)
    SnapshotCell terms_;
};

}  // namespace pard

#include "pard/llm/stage_join.hpp"  // an LLM stage's joins (a friend): after the class it reads
