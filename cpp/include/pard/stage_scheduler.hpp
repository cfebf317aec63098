// pard/stage_scheduler.hpp — StageScheduler: one stage's queue, order and drop rule (DESIGN §3.1–3.4).
//
// Structure. Requests reach the stage through a bounded lock-free MPMC ring (any thread submits;
// a full ring refuses the submit: back-pressure, never a silent loss). The stage's workers form
// batches under one short mutex, taken once per form_batch (or purge) and only by this stage's
// workers, the runtime's purge timer and the simulator's single thread: the worker drains the
// ring into the stage's min-max heap (DEPQ), purges the low-budget end, and pops its batch. The
// planner's terms (downstream estimate, mu, eps, queueing delay, admission share) are read once
// per batch from a SnapshotCell: a consistent snapshot, no lock on the reader side.
//
// The heap key: FCFS orders by arrival at the stage (ties by id); every other order by deadline
// (ties by id), so the heap's min is the lowest remaining budget and its max the highest. A tiered
// policy (pard) keeps one such heap per service tier (pard/tiered_queue.hpp): the low end is the
// global min, the high end ("top") is the max of the highest-weight non-empty tier, and shedding
// takes the "bottom" (the min of the lowest-weight non-empty tier). Tier-blind policies: one heap.
//
// form_batch(now, t_e), in this order:
//   1. drain the ring into the heap. Admission while draining, deterministic (no randomness):
//      a policy with a queue bound (max_queue > 0; at entry stages only when max_queue_entry_only)
//      rejects a request that finds max_queue queued (reason `rejected`); every drop rule except
//      `none` admits only the published admit_fraction share (reason `rejected`) — a tiered policy
//      takes that share from the lowest-weight tiers first, by their recent arrival shares; `dagor`
//      additionally, while the published queueing delay exceeds its threshold, admits only a
//      (1 - alpha) share (reason `overload`).
//   1b. pard only, downstream="busy" (a published floor_downstream): when the published downstream term
//      leaves no queued request feasible in a batch of one and nothing below backs it (below_idle: no
//      stage below holds a request, signals overload, or runs batches past the request's arrival there),
//      this batch takes the floor Σq + Σd instead (floor_if_self_refuting says why). Likewise step 2b's
//      raised term (raise_fits).
//   2. pard only: the low-end purge (also run alone, with step 1, by purge(now, t_e)). While the heap's min would be dropped even in a batch of one,
//      t_e + d_k(1) + downstream > deadline, remove it (reason `infeasible`; on a tiered stage each tier's
//      low end with its own term, tier_downstream_ns: a tier that outranks another takes its
//      outrank_downstream term, the running batch and its own queues below). d_k(1) <= d_k(b), so
//      the purge never drops a request that the pop-time rule would keep; it is what keeps HBF from
//      letting low-budget requests sit in the queue forever. (d_k is the profile's d(b) times the
//      published duration_scale, the online measured/profiled ratio, throughout; until the planner
//      has measured one — published duration_scale 0 — the stage's own ratio, see effective_terms.)
//   2b. reactive (pard): the hot-path overload test, once per batch. With n queued, the published
//      service rate R (requests/s at full batches) and the slack of the request with the most of it,
//      s_max = max deadline - (t_e + d_k(b) + downstream): the queue needs about n / R to drain; if
//      that exceeds s_max, EDF (LBF) would spend the stage on requests that leave it with no slack.
//      A lone request (n = 1) never holds the test: nothing is ahead of it. (Until 2026-12-03 one
//      request queued with under 1 / R of slack held it, and an idle chain with a tight but feasible
//      SLO then popped every request under the overload term below and dropped all of them. Counting
//      the n - 1 ahead of the request with the most slack instead also fixed that, but moved the grid
//      and the on-off tests both ways; the lone-request rule leaves every queue of two or more as it was.)
//      Then this batch is popped HBF at once (without waiting for the planner's mu), and the requests
//      that cannot even leave this stage in time in that order are shed now (not before the planner
//      has published a measured ratio: shed_blind()), from the bottom (reason `shed`): batches of B = max_batch start
//      every B / R, so with l_max = max deadline - (t_e + d_k(b)) (this stage's own finish, no
//      downstream estimate) at most S(l_max) = B * (floor(R * l_max / B) + 1) requests can start by
//      then, and every request past the first S(l_max) would start after its own deadline. The test
//      is the fluid count, the shed the batch count (up to a batch more): a wrong order switch costs
//      less than a wrong shed, which loses the request. Shedding them at once frees their DAG siblings at once;
//      requests that are only estimated to miss downstream stay for the purge and pop rule, whose
//      estimate may shrink.
//      When the test holds, this batch's pop rule (step 4) uses the larger of the published downstream
//      term and overload_downstream (0 unless the policy's overload_upper: pard-upper's Σq + 2Σd): an
//      overloaded stage forwards at its full rate, so the stages below are about to be busy whatever
//      the planner measured over its window. The purge (step 2) keeps the published term.
//      With the policy's overload_below, the pop rule takes that term also while a stage below this
//      one signals, now, that it is backed up (BelowSignal: its own step 2b test held at its last batch
//      and it still holds a request,
//      or it holds a full batch queued): the planner's queueing and utilisation terms average over
//      its window, so a burst that piles up at a downstream bottleneck is seen by the stages above only
//      a sync later; the stages below are read here, once per batch, through relaxed atomics
//      (set_below wires them, once, before any batch forms).
//   2c. pace (pard, with 2b firing): when the published path_rate P (the least service rate among the
//      stages below) is under this stage's R, the batch is the smallest whose throughput b/d_k(b)
//      reaches P / R of the full batch's, and 2b's shedding uses P for R. An
//      overloaded stage then forwards about what the path can finish: the excess is dropped here,
//      once, before a stage below spends on it (in a DAG, before one branch serves what its sibling
//      drops). The pop of step 4 stops at that batch size.
//   3. b = min(queued, max_batch) (queued after steps 1–2) and d = d_k(b): the batch size being
//      formed and its nominal duration, fixed for the whole formation.
//   4. pop in the current order (FCFS and LBF: pop_min, but LBF on a tiered stage pop_top_low, the most
//      valuable tier's lowest budget first; HBF: pop_top) until the batch holds
//      max_batch requests or the heap is empty, applying the drop rule to each popped request:
//        none     keep;
//        pard     drop iff t_e + d + downstream > deadline (Eq. 3b; equal keeps)      -> infeasible
//                 With Policy::live_queues, downstream is at least the published term plus what the
//                 queues below hold now beyond the planner's q_i and beyond what they drain before the
//                 request reaches them (t_e + d), along the worst path (below_lag_ns): the planner's
//                 q_i is a window mean, and a backlog piling up below is seen a sync late through it.
//        clipper  deadline < t_e -> expired; t_e - arrival > slo_k -> stage-budget
//        dagor    deadline < t_e -> expired
//        triton   t_e - arrival > slo (the same queue timeout at every stage)          -> timeout
//        ray-serve deadline < t_e (one end-to-end timeout, cancelled wherever it is)   -> expired
//      The timeout rules are judged at t_e, the batch's start, not at now: a worker collects its next
//      batch as its current one starts (DESIGN §3.1), and a request still waiting when its timeout
//      passes never runs in those systems (a new user's test found ray-serve running a request whose
//      deadline had passed 0.3 s before its batch started).
//        nexus    the window rule below.
//      A popped request for which is_cancelled(id) holds (a sibling DAG branch was dropped) is
//      discarded without compute, reason `cancelled`, whatever the rule.
//   nexus window rule (exact): scan the queue in the current order (FCFS for nexus), classifying
//      each request feasible iff t_e + d - arrival <= slo_k. As soon as the last b scanned requests
//      are all feasible, that run is the window: every request scanned before it is dropped (reason
//      `window`, feasible or not) and the window is the batch. If the queue runs out first, there is
//      no full window: the infeasible scanned requests are dropped (reason `window`), the first b
//      feasible ones (in order) form the batch and any further feasible ones go back to the queue.
//
// Coherent rank (Policy::coherent_rank, pard): on a stage that lies on one of several parallel DAG
//   branches (set_parallel, from parallel_branches), in overload the queue is keyed by a
//   pseudo-random rank of the request id (StageKeyLess::rank) instead of the deadline: step 4 pops the top
//   ranks and step 2b sheds the bottom ones, so overloaded sibling branches serve and shed the same
//   requests (sync_rank says why). Steps 2 and 2b then read the latest deadline queued from a running
//   maximum (latest_deadline); the purge takes the low ranks while they are infeasible, and any other
//   infeasible request is dropped when popped.
// Adaptive order (§3.3) lives in publish(): mu > 1 + eps -> HBF; mu < 1 - eps -> LBF; otherwise the
// order is kept (hysteresis). It starts in LBF.
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

#include "pard/depq.hpp"
#include "pard/estimator.hpp"
#include "pard/mpmc_ring.hpp"
#include "pard/policy.hpp"
#include "pard/profile.hpp"
#include "pard/request.hpp"
#include "pard/snapshot.hpp"
#include "pard/tiered_queue.hpp"

namespace pard {

// One dropped request and why (Reason code).
struct Drop {
    Request request;
    Reason reason;
};

// What form_batch hands back; reuse one per worker so the hot path does not allocate.
struct BatchResult {
    std::vector<Request> batch;   // in service order
    std::vector<Drop> drops;      // in the order they were decided
    std::int64_t expected_duration_ns = 0;  // d_k(b) for the batch size b planned (0 if nothing queued)
    void clear() noexcept {
        batch.clear();
        drops.clear();
        expected_duration_ns = 0;
    }
};

// The stage queue's strict weak order, chosen once by the policy: (arrival, id) or (deadline, id).
// A third key, the coherent rank (Policy::coherent_rank), orders by a fixed pseudo-random rank of the
// request's id that every stage computes alike (ties by id).
struct StageKeyLess {
    bool by_arrival = false;
    bool by_rank = false;
    // SplitMix64's finaliser of the id, halved into a non-negative int64: uniform, and the same for
    // every copy of a request on every stage and every process.
    static constexpr std::int64_t rank(std::uint64_t id) noexcept {
        std::uint64_t x = id + 0x9e3779b97f4a7c15ULL;
        x = (x ^ (x >> 30U)) * 0xbf58476d1ce4e5b9ULL;
        x = (x ^ (x >> 27U)) * 0x94d049bb133111ebULL;
        return static_cast<std::int64_t>((x ^ (x >> 31U)) >> 1U);
    }
    bool operator()(const Request& a, const Request& b) const noexcept {
        if (by_rank) {
            const std::int64_t ra = rank(a.id), rb = rank(b.id);
            return ra < rb || (ra == rb && a.id < b.id);
        }
        return by_arrival ? ByArrival{}(a, b) : ByDeadline{}(a, b);
    }
    // The same order as a split key, so the DEPQ sifts 16-byte nodes (pard/depq.hpp).
    std::int64_t primary(const Request& r) const noexcept {
        return by_rank ? rank(r.id) : (by_arrival ? r.arrival_ns : r.deadline_ns);
    }
    static std::uint64_t tiebreak(const Request& r) noexcept { return r.id; }
};

struct NeverCancelled {
    constexpr bool operator()(std::uint64_t /*id*/) const noexcept { return false; }
};

struct StageConfig {
    int stage = 0;                 // the stage's index in its pipeline (reported with each drop)
    Profile profile;               // d_k(b)
    std::int64_t max_batch = 1;    // largest batch this stage forms
    Policy policy;                 // order x drop rule x parameters
    double budget_fraction = 1.0;  // clipper/nexus stage budget: slo_k = slo * budget_fraction
    std::size_t ring_capacity = 65536;  // ingress ring slots (a power of two)
    std::vector<double> tier_weights;   // tier t's weight (> 0); used by tiered policies; empty = one tier
    bool entry = true;                  // an entry stage (where max_queue_entry_only bounds apply)
};

class StageScheduler {
public:
    explicit StageScheduler(StageConfig cfg)
        : cfg_(validated(std::move(cfg))),
          ring_(cfg_.ring_capacity),
          heap_(StageKeyLess{cfg_.policy.keyed_by_arrival()},
                cfg_.policy.tiered ? cfg_.tier_weights : std::vector<double>{}),
          tier_throttle_(heap_.tiers()),
          tier_seen_(heap_.tiers(), 0.0),
          tier_fraction_(heap_.tiers(), 1.0),
          tier_size_(heap_.tiers()),
          order_(cfg_.policy.order == Order::kAdaptive ? Order::kLbf : cfg_.policy.order) {
        heap_.reserve(1024);
        for (auto& n : tier_size_) n.store(0, std::memory_order_relaxed);
        tier_thr_.resize(heap_.tiers());
        purge_thr_.resize(heap_.tiers());
        outranks_ = outranking_tiers(heap_.tiers() > 1 ? cfg_.tier_weights : std::vector<double>{});
        by_tier_low_ = heap_.tiers() > 1 && !cfg_.policy.keyed_by_arrival();
        scratch_.reserve(static_cast<std::size_t>(cfg_.max_batch) * 2);
    }
    StageScheduler(const StageScheduler&) = delete;
    StageScheduler& operator=(const StageScheduler&) = delete;

    // Any thread. False when the ingress ring is full (back-pressure): the caller must reject.
    bool submit(const Request& r) noexcept { return ring_.try_push(r); }

    // The single-threaded owner's submit (the simulator, the only thread that touches its stages):
    // as submit(), with the same capacity, but into a plain buffer that the next drain empties before
    // the ring, in submission order, so it costs none of the ring's atomic operations. Not for use
    // while another thread submits or forms batches.
    bool submit_local(const Request& r) {
        if (local_.size() >= cfg_.ring_capacity) return false;
        local_.push_back(r);
        local_size_.store(local_.size(), std::memory_order_relaxed);
        return true;
    }

    // Planner thread (any one thread at a time). Publishes the terms and steps the adaptive order.
    void publish(const PublishedTerms& t) {
        std::lock_guard<std::mutex> guard(publish_mu_);
        if (cfg_.policy.order == Order::kAdaptive) {
            const Order cur = order_.load(std::memory_order_relaxed);
            Order next = cur;
            if (t.mu > 1.0 + t.eps) {
                next = Order::kHbf;
            } else if (t.mu < 1.0 - t.eps) {
                next = Order::kLbf;
            }
            order_.store(next, std::memory_order_relaxed);
        }
        if (order_.load(std::memory_order_relaxed) != Order::kHbf) calm_publishes_.fetch_add(1, std::memory_order_relaxed);
        terms_.store(t);
    }

    [[nodiscard]] PublishedTerms terms() const noexcept { return terms_.load(); }

    // The stages below this one (every stage reachable through its successors), read by step 2b's pop
    // rule under Policy::overload_below. Set once by the pipeline that owns them all (stages_below),
    // before any thread forms a batch; the pointers must outlive this scheduler's use.
    void set_below(std::vector<const StageScheduler*> below) {
        below_ = std::move(below);
        lag_plan_.clear();  // below_lag_ns plans again
    }

    // Whether this stage lies on one of several parallel DAG branches: some other stage is neither above
    // nor below it (parallel_branches). Where Policy::coherent_rank applies. Set once by the pipeline
    // that owns the stages, before any thread forms a batch.
    void set_parallel(bool parallel) noexcept { parallel_ = parallel; }
    [[nodiscard]] bool parallel() const noexcept { return parallel_; }

    // When the batches this stage has formed are expected to end (the latest t_e + d_k(b); ns on the
    // scheduler's clock). Any thread; relaxed.
    [[nodiscard]] std::int64_t busy_until_ns() const noexcept { return busy_until_ns_.load(std::memory_order_relaxed); }

    // Whether this stage's hot-path overload test (step 2b) held at its last batch formation and it still
    // holds a request queued. Any thread; best effort, relaxed loads. The queue matters: a stage that went
    // idle forms no batch to clear the flag, and a stage above that read it then raised its pop rule
    // (overload_below) at every batch, dropped everything, and so never sent the request that would clear
    // it: a three-stage chain at twice its capacity served 2 of 7 040 requests (jitter 0; 2026-12-03).
    [[nodiscard]] bool overloaded_now() const noexcept {
        return overloaded_.load(std::memory_order_relaxed) && queued() > 0;
    }

    // How much longer than the planner's window mean (published queue_delay q) a request reaching this
    // stage transit_ns from now would wait here, by the queue now: max(0, queued / R - q - transit) in ns,
    // R the effective service rate at full batches (0 while R is unknown). queued / R is the fluid drain
    // time of the backlog; what of it the stage finishes before the request arrives does not delay it
    // (arrivals meanwhile are what q stands for). 0 while the stage is unmeasured (no batch run, no
    // ratio published): a live stage whose thread has not run yet holds a queue that its profile may
    // overstate a hundredfold (the README's embedded example lost 79 % of a burst to it). What the stages
    // above read under Policy::live_queues. Any thread; best effort (relaxed loads).
    // min_weight > 0 (a tiered stage above asking for one of its tiers): while this stage serves the
    // highest-weight non-empty tier first (HBF, and LBF unless keyed by arrival: queued_ahead), only the
    // requests of tiers weighing at least min_weight are ahead of such a request (and, untiered yet,
    // whatever waits in the ring); in FCFS every queued request may be.
    [[nodiscard]] std::int64_t queue_lag_ns(std::int64_t transit_ns = 0, double min_weight = 0.0) const noexcept {
        const PublishedTerms published = terms_.load();
        if (unmeasured(published)) return 0;  // R would be the profile's word alone (as step 2b's shed)
        const PublishedTerms t = effective(published);
        if (!(t.service_rate > 0.0)) return 0;
        const double wait_ns = static_cast<double>(queued_ahead(min_weight)) / t.service_rate * 1e9;
        const double lag = wait_ns - static_cast<double>(t.queue_delay_ns) - static_cast<double>(transit_ns);
        return lag > 0.0 ? static_cast<std::int64_t>(lag) : 0;
    }

    // Any worker thread, once a batch of b requests has run for measured_ns: adds it to the stage's own
    // measured and profiled sums, the d_k(b) correction used until the planner publishes one
    // (effective_terms). Lock-free: two relaxed additions per batch. The simulator calls it at the
    // batch's end, as a live worker can, so a simulated run sees what a live one does.
    void observe_batch(std::int64_t b, std::int64_t measured_ns) noexcept {
        if (b < 1 || measured_ns < 0) return;
        if (b > cfg_.max_batch) b = cfg_.max_batch;
        measured_sum_ns_.fetch_add(measured_ns, std::memory_order_relaxed);
        profiled_sum_ns_.fetch_add(cfg_.profile.duration_ns(b), std::memory_order_relaxed);
    }

    // The stage's own measured / profiled ratio over every batch it has run (count-weighted, as the
    // planner's DurationScale starts), clipped to [kDurationScaleMin, kDurationScaleMax]; 1 (the
    // profile) before its first batch. The two sums are read one after the other: a batch observed in
    // between shifts the ratio by at most that one batch.
    [[nodiscard]] double own_duration_scale() const noexcept {
        const std::int64_t p = profiled_sum_ns_.load(std::memory_order_relaxed);
        if (p <= 0) return 1.0;
        const double s = static_cast<double>(measured_sum_ns_.load(std::memory_order_relaxed)) / static_cast<double>(p);
        return s < kDurationScaleMin ? kDurationScaleMin : (s > kDurationScaleMax ? kDurationScaleMax : s);
    }

    // The terms the hot path uses: the published ones, except while their duration_scale is 0 (the
    // planner has measured nothing yet: PolicySpec.prior_terms publishes the profile's idle-interval
    // terms before the first sync). Then the stage takes its own ratio s from the batches it has run
    // as the whole pipeline's (the executors share one machine: DurationScale's pooled ratio) and
    // applies it to every term the prior computed from the profile: d_k(b) and the downstream terms
    // times s, the service and path rates divided by s. Why: a burst that arrives before the first
    // sync (1 s) would otherwise be shed by a profile far slower than the executors (issue 9 item 4:
    // the README's NumPy example, 100x faster than declared, shed 80 % of a 1 000-request burst).
    [[nodiscard]] PublishedTerms effective_terms() const noexcept { return effective(terms_.load()); }

    // The order the next batch is popped in: fcfs, lbf or hbf (never adaptive).
    [[nodiscard]] Order current_order() const noexcept { return order_.load(std::memory_order_relaxed); }

    // Requests waiting (heap + ring); best effort while other threads submit or form batches.
    [[nodiscard]] std::size_t queued() const noexcept {
        return heap_size_.load(std::memory_order_relaxed) + ring_.size_approx() +
               local_size_.load(std::memory_order_relaxed);
    }

    [[nodiscard]] const StageConfig& config() const noexcept { return cfg_; }

    // The earliest deadline in the heap (kNoDeadline when empty, or under the rank key): the request an
    // admission pushes furthest back while the stage pops HBF (pard/door.hpp). Best effort, relaxed.
    static constexpr std::int64_t kNoDeadline = std::numeric_limits<std::int64_t>::max();
    [[nodiscard]] std::int64_t earliest_queued_deadline_ns() const noexcept {
        return earliest_queued_.load(std::memory_order_relaxed);
    }

    // queued(), less the heap's requests of tiers weighing under min_weight while this stage pops the
    // highest-weight tier first: in HBF, and in LBF unless keyed by arrival (by_tier_low_, pop_top_low)
    // (queue_lag_ns). Best effort (relaxed loads of sizes stored after each heap change).
    [[nodiscard]] std::size_t queued_ahead(double min_weight) const noexcept {
        const std::size_t all = queued();
        const bool top_first = by_tier_low_ || current_order() == Order::kHbf;
        if (!(min_weight > 0.0) || tier_size_.size() < 2 || !top_first) return all;
        std::size_t below = 0;
        for (std::size_t k = 0; k < tier_size_.size(); ++k) {
            if (cfg_.tier_weights[k] < min_weight) below += tier_size_[k].load(std::memory_order_relaxed);
        }
        return below < all ? all - below : 0;
    }
    // d_k(b) as this stage expects it now: the profile's, times the published duration_scale (the
    // planner's online measured / profiled ratio; 1 for policies that do not correct). What a worker
    // that pre-collects its next batch takes as the running batch's end (t_e).
    [[nodiscard]] std::int64_t expected_duration_ns(std::int64_t b) const noexcept {
        return scaled(cfg_.profile.duration_ns(b), effective_terms().duration_scale);
    }

    // Moves everything in the ring into the heap (with the admission of step 1); admission drops
    // are appended to `drops`. The simulator calls this when a submit finds the ring full.
    template <class IsCancelled = NeverCancelled>
    void drain(std::vector<Drop>& drops, IsCancelled&& is_cancelled = IsCancelled{}) {
        std::lock_guard<std::mutex> guard(mu_);
        sync_rank();
        const PublishedTerms t = effective_terms();
        drain_locked(t, drops, is_cancelled);
        store_sizes();
    }

    // Forms the next batch at time now_ns for a batch expected to start at t_e_ns (>= now_ns).
    // Steps 1–4 of the header comment. `out` is cleared first.
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
            take_run();  // step 1 without the heap (see take_run)
        } else {
            drain_locked(t, out.drops, is_cancelled);
        }
        if (rule == DropRule::kPard) floor_if_self_refuting(t, t_e_ns);  // step 1b
        const Profile& prof = cfg_.profile;

        const double scale = t.duration_scale;
        if (rule == DropRule::kPard) purge_low_end(t, t_e_ns, out.drops, is_cancelled);  // step 2

        const std::size_t max_b = static_cast<std::size_t>(cfg_.max_batch);
        const std::size_t queued_now = heap_.size() + (run_hi_ - run_lo_);
        std::size_t b = queued_now < max_b ? queued_now : max_b;  // step 3
        if (b == 0) {
            store_sizes();
            overloaded_.store(false, std::memory_order_relaxed);
            return;
        }
        std::int64_t d = scaled(prof.duration_ns(static_cast<std::int64_t>(b)), scale);
        bool pop_max = ranked_ || current_order() == Order::kHbf;  // by rank: the top ranks first
        std::size_t limit = max_b;  // step 2c lowers it
        const bool pace = paced(t);
        const bool overloaded = rule == DropRule::kPard && cfg_.policy.reactive && !cfg_.policy.keyed_by_arrival() &&
                                t.service_rate > 0.0 &&
                                react_to_overload(t, t_e_ns, d, pace, !shed_blind(published), out, is_cancelled);  // 2b
        overloaded_.store(overloaded, std::memory_order_relaxed);
        if (overloaded) {
            pop_max = true;
            b = heap_.size() < max_b ? heap_.size() : max_b;
            if (pace) b = limit = paced_batch(t, b);  // step 2c
            d = scaled(prof.duration_ns(static_cast<std::int64_t>(b)), scale);
        }
        out.expected_duration_ns = d;

        switch (rule) {  // step 4: one small verdict function per rule
            case DropRule::kNone:
                pop_loop(out, pop_max, is_cancelled, [](const Request&) { return -1; });
                break;
            case DropRule::kPard: {
                const std::int64_t down = pop_downstream_ns(t, (overloaded || below_signals()) && raise_fits(t, t_e_ns, d));
                if (cfg_.policy.live_queues && heap_.tiers() > 1) {  // a threshold per tier: tier_thresholds
                    tier_thresholds(t, t_e_ns - now_ns + d, t_e_ns, d, down);
                    pop_loop(out, pop_max, is_cancelled, [this](const Request& r) {
                        return pard_drops(r, tier_thr_[heap_.index(r.tier)]) ? static_cast<int>(Reason::kInfeasible) : -1;
                    }, limit);
                    break;
                }
                std::int64_t best = down;
                if (cfg_.policy.live_queues) {  // the larger of two estimates of the same downstream latency
                    const std::int64_t live = t.downstream_ns + below_lag_ns(t_e_ns - now_ns + d);
                    best = live > best ? live : best;
                }
                const std::int64_t thr = pard_threshold(t_e_ns, d, best);
                pop_loop(out, pop_max, is_cancelled, [thr](const Request& r) {
                    return pard_drops(r, thr) ? static_cast<int>(Reason::kInfeasible) : -1;
                }, limit);
                break;
            }
            case DropRule::kClipper: {
                const double f = cfg_.budget_fraction;
                pop_loop(out, pop_max, is_cancelled,
                         [t_e_ns, f](const Request& r) { return clipper_verdict(r, t_e_ns, f); });
                break;
            }
            case DropRule::kDagor:
            case DropRule::kRayServe:
                pop_loop(out, pop_max, is_cancelled, [t_e_ns](const Request& r) {
                    return expired(r, t_e_ns) ? static_cast<int>(Reason::kExpired) : -1;
                });
                break;
            case DropRule::kTriton:
                pop_loop(out, pop_max, is_cancelled, [t_e_ns](const Request& r) {
                    return queue_timed_out(r, t_e_ns) ? static_cast<int>(Reason::kTimeout) : -1;
                });
                break;
            case DropRule::kNexus:
                nexus_window(out, pop_max, b, t_e_ns, d, is_cancelled);
                break;
        }
        for (; run_lo_ < run_hi_; ++run_lo_) heap_.push(run_[run_lo_]);  // what the batch left of the run
        if (!out.batch.empty() && t_e_ns + out.expected_duration_ns > busy_until_ns_.load(std::memory_order_relaxed)) {
            busy_until_ns_.store(t_e_ns + out.expected_duration_ns, std::memory_order_relaxed);  // under mu_
        }
        store_sizes();
    }

    // Steps 1 and 2 alone, no batch formed: drains the ring and, for pard, purges the low-budget end
    // for a batch expected to start at t_e_ns (>= now_ns), appending what it dropped to `drops`.
    // For a stage whose workers are all busy, so that a request that became infeasible is dropped
    // at once rather than when the next batch forms (Triton #7512); t_e_ns is the earliest time a
    // worker can start a new batch. Rules without a low-end purge: nothing, not even the drain
    // (admission stays at batch formation).
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

private:
    // True while neither the planner nor this stage has measured a batch: the published duration_scale
    // is 0 and no batch has been observed. Then the stage reports no queue lag (queue_lag_ns): its rate
    // would be the profile's word alone.
    [[nodiscard]] bool unmeasured(const PublishedTerms& published) const noexcept {
        return published.duration_scale == 0.0 && profiled_sum_ns_.load(std::memory_order_relaxed) == 0;
    }

    // True while the planner has published no measured ratio (duration_scale 0: prior_terms, before the
    // first sync that saw a batch). Then step 2b does not shed; the order switch still holds, and the
    // purge and pop rule still drop what is infeasible by the stage's own ratio. Why: a shed is
    // irreversible, and until then its evidence would be the profile (a burst that finds the first batch
    // forming would be cut to what the profile says) or the stage's own first batches, whose ratio sets
    // the service rate for every request queued: a live README-example burst, once in the test suite,
    // shed 784 of 1 000 on it. The planner's ratio pools every stage's batches over its window with a
    // prior (pard.duration_scale).
    [[nodiscard]] static bool shed_blind(const PublishedTerms& published) noexcept {
        return published.duration_scale == 0.0;
    }

    [[nodiscard]] PublishedTerms effective(PublishedTerms t) const noexcept {
        if (t.duration_scale > 0.0) return t;
        const double s = own_duration_scale();
        t.duration_scale = s;
        if (s != 1.0) {
            t.downstream_ns = scaled(t.downstream_ns, s);
            t.overload_downstream_ns = scaled(t.overload_downstream_ns, s);
            t.floor_downstream_ns = scaled(t.floor_downstream_ns, s);
            t.outrank_downstream_ns = scaled(t.outrank_downstream_ns, s);
            t.service_rate /= s;
            t.path_rate /= s;
        }
        return t;
    }

    // Step 2 (mu_ held): drop the heap's min while even a batch of one starting at t_e_ns misses.
    template <class IsCancelled>
    void purge_low_end(const PublishedTerms& t, std::int64_t t_e_ns, std::vector<Drop>& drops,
                       IsCancelled& is_cancelled) {
        const std::int64_t d1 = scaled(cfg_.profile.duration_ns(1), t.duration_scale);
        for (std::size_t k = 0; k < purge_thr_.size(); ++k) {
            purge_thr_[k] = pard_threshold(t_e_ns, d1, tier_downstream_ns(t, k));
        }
        heap_.drain_min_while([this](const Request& r) { return pard_drops(r, purge_thr_[heap_.index(r.tier)]); },
                              [&](Request&& r) { discard(drops, r, Reason::kInfeasible, is_cancelled); });
    }

    static StageConfig validated(StageConfig c) {
        if (c.stage < 0) throw std::invalid_argument("StageScheduler: stage=" + std::to_string(c.stage) + " must be >= 0");
        if (c.max_batch < 1 || c.max_batch > Profile::kMaxTable) {
            throw std::invalid_argument("StageScheduler: max_batch=" + std::to_string(c.max_batch) +
                                        " must be in [1, " + std::to_string(Profile::kMaxTable) + "]");
        }
        if (!(c.budget_fraction > 0.0 && c.budget_fraction <= 1.0)) {
            throw std::invalid_argument("StageScheduler: budget_fraction=" + std::to_string(c.budget_fraction) +
                                        " must be in (0, 1]");
        }
        if (c.ring_capacity < 2 || (c.ring_capacity & (c.ring_capacity - 1)) != 0) {
            throw std::invalid_argument("StageScheduler: ring_capacity=" + std::to_string(c.ring_capacity) +
                                        " must be a power of two >= 2");
        }
        c.policy.validate();
        if (c.policy.tiered) {
            for (std::size_t t = 0; t < c.tier_weights.size(); ++t) {
                if (!(std::isfinite(c.tier_weights[t]) && c.tier_weights[t] > 0.0)) {
                    throw std::invalid_argument("StageScheduler: tier_weights[" + std::to_string(t) + "]=" +
                                                std::to_string(c.tier_weights[t]) + " must be finite and > 0");
                }
            }
        }
        return c;
    }

    template <class IsCancelled>
    static void discard(std::vector<Drop>& drops, const Request& r, Reason why, IsCancelled& is_cancelled) {
        drops.push_back(Drop{r, is_cancelled(r.id) ? Reason::kCancelled : why});
    }

    // d_k(b) scaled by the published measured/profiled ratio (exactly d_k(b) at scale 1).
    static std::int64_t scaled(std::int64_t d, double scale) noexcept {
        if (scale == 1.0) return d;
        const auto v = static_cast<std::int64_t>(static_cast<double>(d) * scale + 0.5);
        return v < 1 ? 1 : v;
    }

    // The downstream term of the pop rule (step 4): the published one, raised to overload_downstream
    // when this batch's overload test held (step 2b).
    [[nodiscard]] static std::int64_t pop_downstream_ns(const PublishedTerms& t, bool overloaded) noexcept {
        return overloaded && t.overload_downstream_ns > t.downstream_ns ? t.overload_downstream_ns : t.downstream_ns;
    }

    // Step 1b: the published downstream term of downstream="busy" (Σq + Σd + Σ rho_i d_i) forecasts that a
    // request meets, at each stage below, a running batch as often as that stage was busy. When it leaves
    // no queued request feasible, even the one with the most slack in a batch of one, this stage would
    // purge and drop its whole queue; nothing then reaches the stages below, they go idle, and the
    // forecast refutes itself: they were busy with what this stage sent them. Then this batch takes the
    // published floor (Σq + Σd: the queueing the stages below showed and their executions) instead. A
    // two-stage chain of 0.1 s stages fed at 1.2x its capacity with an SLO of 0.25 s served 3.4 req/s on
    // time, against pard-paper's 6.3: the stage below, fed at its own pace by the one above, was busy
    // throughout, yet a request reaching it never waited (a new user's test, 2026-12-03). A backlog that
    // really piles up below shows in its q_i and, with live_queues, in the queues read per batch; and while
    // something below backs the forecast (below_idle is false), it stands.
    void floor_if_self_refuting(PublishedTerms& t, std::int64_t t_e_ns) const noexcept {
        if (t.floor_downstream_ns <= 0 || t.floor_downstream_ns >= t.downstream_ns || heap_.empty()) return;
        const std::int64_t d1 = scaled(cfg_.profile.duration_ns(1), t.duration_scale);
        if (self_refuting(t.downstream_ns, t_e_ns, d1)) t.downstream_ns = t.floor_downstream_ns;
    }

    // Whether the raised term (overload_downstream) leaves the request with the most slack feasible. If it
    // does not, it would drop the whole queue, and then nothing reaches the stages below: they stay idle,
    // and the premise of the raise (an overloaded stage forwards at full rate, so the stages below are
    // about to be busy) never comes true. With an SLO under pard-upper's Σq + 2Σd, a stage kept that up at
    // every batch of a sustained overload: a three-stage chain at twice its capacity, SLO 0.135 s against
    // 2Σd = 0.138 s, served 12 of 7 040 requests where pard-paper served 3 279 (a new user's test,
    // 2026-12-03). The published term, measured from what the stages below do, decides then.
    [[nodiscard]] bool raise_fits(const PublishedTerms& t, std::int64_t t_e_ns, std::int64_t d) const noexcept {
        return t.overload_downstream_ns <= t.downstream_ns || !self_refuting(t.overload_downstream_ns, t_e_ns, d);
    }

    // The one rule of step 1b and raise_fits: a downstream term that forecasts busy stages below refutes
    // itself when it leaves no queued request feasible (not even the one with the most slack, in a batch
    // of duration d starting at t_e) while nothing below backs it (below_idle).
    [[nodiscard]] bool self_refuting(std::int64_t term_ns, std::int64_t t_e_ns, std::int64_t d) const noexcept {
        return pard_threshold(t_e_ns, d, term_ns) > latest_deadline() && below_idle(t_e_ns + d);
    }

    // No stage below holds a request queued now, found itself overloaded at its last batch (step 2b), or
    // has batches formed that run past arrive_ns (when a request leaving this stage gets there): what
    // step 1b and raise_fits take as a forecast of busy stages below that nothing backs. A stage fed at
    // its own pace by this one is busy, yet done when the next request arrives; a stage still working
    // through what it took earlier is not (a burst into a -> b, b five times slower: b holds its running
    // and its pre-collected batch with an empty queue, and each request a forwarded then died at b).
    // On Ray the stages below run in other processes and below_ is empty: there the forecasts stand
    // exactly while they leave the request with the most slack feasible.
    [[nodiscard]] bool below_idle(std::int64_t arrive_ns) const noexcept {
        for (const StageScheduler* s : below_) {
            if (s->overloaded_now() || s->queued() > 0 || s->busy_until_ns() > arrive_ns) return false;
        }
        return true;
    }

    // After every heap change (mu_ held): the size the other threads read (queued()) and, for a tiered
    // stage whose stages above read its queue by tier (live_queues), each tier's.
    void store_sizes() noexcept {
        heap_size_.store(heap_.size(), std::memory_order_relaxed);
        earliest_queued_.store(heap_.empty() || ranked_ ? kNoDeadline : heap_.min().deadline_ns, std::memory_order_relaxed);
        if (tier_size_.size() < 2 || !cfg_.policy.live_queues) return;
        for (std::size_t k = 0; k < tier_size_.size(); ++k) tier_size_[k].store(heap_.tier_size(k), std::memory_order_relaxed);
    }

    // Step 4 with live_queues on a tiered stage: one pop threshold per tier. A request of tier k is
    // budgeted the queues below as they stand ahead of it: where a stage below pops HBF, only the tiers
    // weighing at least tier k's weight (queue_lag_ns). A tier-blind lag charged a high-value request
    // for every low-value one queued below, which it would overtake: with the high tier's SLO the
    // tighter, a fork/join pipeline at 1.5x load served 5.5 % of it against nexus's 47.5 %.
    void tier_thresholds(const PublishedTerms& t, std::int64_t transit_ns, std::int64_t t_e_ns, std::int64_t d,
                         std::int64_t down) {
        for (std::size_t k = 0; k < tier_thr_.size(); ++k) {
            const std::int64_t pub = tier_downstream_ns(t, k);
            const std::int64_t live = pub + below_lag_ns(transit_ns, cfg_.tier_weights[k]);
            const std::int64_t base = outranks(k) ? pub : down;  // an outranking tier: no busy or overload term
            tier_thr_[k] = pard_threshold(t_e_ns, d, live > base ? live : base);
        }
    }

    // The published downstream term for a request of tier k. A tier that outranks another (some tier
    // weighs less) is served first at every stage below, ahead of whatever lower tiers queue there, so it
    // meets at a stage below its own tier's queue and the batch running when it arrives: Σd plus, per
    // stage below, min(q_i, d_i / 2) (the mean residual of a running batch, or less where requests wait
    // less: outrank_downstream, published by the planner), plus, with live_queues, the queues below of its
    // own and higher tiers (below_lag_ns). The all-tier q_i is the wait of the lower tiers' backlog in a
    // burst. Without outrank_downstream (a planner that does not publish it) the floor Σq + Σd.
    // The busy term's whole batch per stage below, and the overload term's (Σq + 2Σd), are the backlog
    // the lower tiers meet.
    // - A four-stage chain of 10-30 ms batches at 1.3x load, gold (weight 10, 15 % of requests) with a
    //   0.15 s SLO against 0.3 s and 0.45 s for the others: gold was dropped at the entry on the busy term
    //   (3 064 of 3 102), though gold alone is served in full; pard-paper served 244 (a new user's test).
    // - A six-stage chain, on/off bursts (3 s at 1.6x capacity, 3 s off), gold / silver / free weighted
    //   4 / 2 / 1 with SLOs 0.28 / 0.4 / 0.8 s: on the floor Σq + Σd pard served 744 of 3 239 gold,
    //   pard-paper 1 588 (a new user's test, 2026-12-03; tests/test_sim.py).
    // The lowest-weight tier, and every request of a tier-blind stage, keeps the published term.
    [[nodiscard]] std::int64_t tier_downstream_ns(const PublishedTerms& t, std::size_t k) const noexcept {
        if (!outranks(k)) return t.downstream_ns;
        const std::int64_t own = t.outrank_downstream_ns > 0 ? t.outrank_downstream_ns : t.floor_downstream_ns;
        return own > 0 && own < t.downstream_ns ? own : t.downstream_ns;
    }
    [[nodiscard]] bool outranks(std::size_t k) const noexcept { return k < outranks_.size() && outranks_[k]; }
    // Per tier: whether some other tier weighs less (empty for one tier).
    static std::vector<bool> outranking_tiers(const std::vector<double>& w) {
        std::vector<bool> out(w.size(), false);
        for (std::size_t k = 0; k < w.size(); ++k) {
            for (const double x : w) out[k] = out[k] || x < w[k];
        }
        return out;
    }

    // Policy::live_queues (step 4's pop rule): the most, over the paths below this stage, of the summed
    // queue_lag_ns(transit_ns) of their stages: what the queues below hold now beyond the planner's q_i
    // (which the published downstream term already counts). transit_ns: until the batch being formed
    // ends, the earliest a request in it reaches any stage below. Under mu_. The longest path through the stages below
    // (their reachability order) is found in one pass over them, leaves first (lag_plan_).
    [[nodiscard]] std::int64_t below_lag_ns(std::int64_t transit_ns, double min_weight = 0.0) {
        if (!cfg_.policy.live_queues || below_.empty()) return 0;
        if (lag_plan_.empty()) plan_below_lag();
        std::int64_t best = 0;
        for (const std::size_t i : lag_plan_) {  // leaves first: every stage below i is done before i
            std::int64_t tail = 0;
            for (const std::size_t j : lag_next_[i]) tail = lag_path_[j] > tail ? lag_path_[j] : tail;
            lag_path_[i] = below_[i]->queue_lag_ns(transit_ns, min_weight) + tail;
            best = lag_path_[i] > best ? lag_path_[i] : best;
        }
        return best;
    }

    // Once, at the first below_lag_ns (every stage's set_below has run by then): the order to visit
    // below_ in and, for each, the positions in below_ of the stages below it. A stage below another
    // has strictly fewer stages below it (reachability is a strict order on a DAG), so ascending size
    // is leaves first. With lags >= 0, a longest chain in the reachability order is a longest path.
    void plan_below_lag() {
        const std::size_t m = below_.size();
        lag_plan_.resize(m);
        lag_next_.assign(m, {});
        lag_path_.assign(m, 0);
        for (std::size_t i = 0; i < m; ++i) {
            lag_plan_[i] = i;
            for (std::size_t j = 0; j < m; ++j) {
                const auto& under = below_[i]->below_;
                if (std::find(under.begin(), under.end(), below_[j]) != under.end()) lag_next_[i].push_back(j);
            }
        }
        std::stable_sort(lag_plan_.begin(), lag_plan_.end(), [this](std::size_t a, std::size_t b) {
            return below_[a]->below_.size() < below_[b]->below_.size();
        });
    }

    // Step 2b's cross-stage signal (Policy::overload_below): a stage below is backed up now.
    [[nodiscard]] bool below_signals() const noexcept {
        if (cfg_.policy.overload_below == BelowSignal::kNone) return false;
        for (const StageScheduler* s : below_) {
            if (s->overloaded_now()) return true;
        }
        return false;
    }

    // Step 2b: true when the queue cannot drain within the largest slack at the published service
    // rate; then sheds the unreachable bottom of the queue (reason `shed`).
    template <class IsCancelled>
    bool react_to_overload(const PublishedTerms& t, std::int64_t t_e_ns, std::int64_t d, bool pace, bool may_shed,
                           BatchResult& out, IsCancelled& is_cancelled) {
        const double n = static_cast<double>(heap_.size());
        const std::int64_t latest = latest_deadline();
        const double slack_max_s = static_cast<double>(latest - pard_threshold(t_e_ns, d, t.downstream_ns)) * 1e-9;
        // A lone request has nothing ahead of it: it starts at t_e whatever its slack.
        if (n <= 1.0) return false;
        if (n <= t.service_rate * slack_max_s) return false;  // fluid: switching order early costs little
        if (!cfg_.policy.shed || !may_shed) return true;
        // Shed only what cannot even leave this stage in time: the downstream term is an estimate that
        // a burst inflates (and the purge and pop rule apply it anyway), this stage's own finish is not.
        // At least one batch is always kept (startable(., 0) is one batch).
        const double local_s = static_cast<double>(latest - t_e_ns - d) * 1e-9;
        const double rate = pace ? t.path_rate : t.service_rate;  // step 2c: what this stage forwards
        const auto keep = static_cast<std::size_t>(startable(rate, local_s > 0.0 ? local_s : 0.0));
        while (heap_.size() > keep) discard(out.drops, heap_.pop_bottom(), Reason::kShed, is_cancelled);
        return true;
    }

    // Step 2b's shed count: how many queued requests can start within s seconds at `rate` requests/s in
    // batches of B = max_batch. The batch that starts now holds B, and the stage starts another every
    // B / rate seconds, so B * (floor(rate * s / B) + 1) (<= 0 when s < 0). The fluid count rate * s
    // is short by up to a batch, because a batch's requests all start with its first: one stage,
    // d(4) = 0.2 s, 9 queued with 0.29 s of slack at the most, would keep 5 by the fluid count where
    // 8 finish in time (a new user's test; issue 9 item 3).
    [[nodiscard]] double startable(double rate, double s) const noexcept {
        const auto b = static_cast<double>(cfg_.max_batch);
        return b * (std::floor(rate * s / b) + 1.0);
    }

    // Step 2c applies: pace is on and a stage below finishes fewer requests/s than this one.
    [[nodiscard]] bool paced(const PublishedTerms& t) const noexcept {
        return cfg_.policy.pace && t.path_rate > 0.0 && t.path_rate < t.service_rate;
    }

    // Step 2c: the smallest batch (<= b) whose throughput b'/d(b') reaches path_rate / service_rate of
    // the full batch's B/d(B): the stage forwards about what the slowest stage below can finish, so the
    // excess waits here (HBF: the newest go first) and is purged or shed here, before any stage below
    // spends on it. In a DAG this is what keeps sibling branches from dropping different requests (each
    // branch, overloaded on its own, would serve its own newest; the requests one keeps and the other
    // drops waste the first's compute). Scanned from b' = 1: the profile need not make b/d(b) monotone.
    [[nodiscard]] std::size_t paced_batch(const PublishedTerms& t, std::size_t b) const noexcept {
        const Profile& prof = cfg_.profile;
        const auto full = static_cast<std::int64_t>(cfg_.max_batch);
        const double want = t.path_rate / t.service_rate * static_cast<double>(full) /
                            static_cast<double>(prof.duration_ns(full));
        for (std::size_t c = 1; c < b; ++c) {
            if (static_cast<double>(c) / static_cast<double>(prof.duration_ns(static_cast<std::int64_t>(c))) >= want) {
                return c;
            }
        }
        return b;
    }

    // Coherent rank (mu_ held): a stage on a parallel DAG branch (set_parallel) under a policy with
    // coherent_rank keys its queue by StageKeyLess::rank in overload, and by deadline otherwise. In
    // overload means: the published order is HBF, or the stage's own step 2b test fired at a batch since
    // the planner last published a calm order (not HBF). The second form covers the time before the
    // planner has seen a burst (up to a sync: a live run's first second, a burst after calm), when
    // step 2b alone pops HBF by deadline, which is as incoherent as the paper's HBF (bench/live_dag.py:
    // join efficiency 0.91 without it, 0.995 with it). A switch re-keys the queue in O(n), at most about
    // twice per sync.
    // Why: overloaded sibling branches that each serve their own newest requests serve different ones,
    // and every copy one branch serves that its sibling drops is compute wasted at the join. Served by
    // one shared rank, the branches keep the same requests: the slower branch's kept set lies inside
    // the faster's, and shedding (pop_bottom) takes the same low ranks on every branch.
    void sync_rank() {
        if (!parallel_ || !cfg_.policy.coherent_rank) return;
        const std::uint64_t calm = calm_publishes_.load(std::memory_order_relaxed);
        const bool hbf = current_order() == Order::kHbf;
        const bool want = ranked_ ? (hbf || calm == ranked_at_calm_) : (hbf || overloaded_.load(std::memory_order_relaxed));
        if (want == ranked_) return;
        ranked_ = want;
        ranked_at_calm_ = calm;
        heap_.rekey(StageKeyLess{cfg_.policy.keyed_by_arrival(), want}, rekey_scratch_);
    }

    // The latest deadline queued (heap not empty): the heap's max under the deadline key; under the
    // rank key the latest pushed since the heap was last empty (an upper bound once that request has
    // left: the overload test then fires a little later and sheds a little less).
    [[nodiscard]] std::int64_t latest_deadline() const noexcept {
        return ranked_ ? latest_pushed_ : heap_.max().deadline_ns;
    }

    template <class IsCancelled>
    void drain_locked(const PublishedTerms& t, std::vector<Drop>& drops, IsCancelled& is_cancelled) {
        const DropRule rule = cfg_.policy.drop;
        const bool throttled = rule != DropRule::kNone && t.admit_fraction < 1.0;
        const bool overloaded = rule == DropRule::kDagor && t.queue_delay_ns > cfg_.policy.dagor_threshold_ns;
        const bool bounded = cfg_.policy.max_queue > 0 && (cfg_.entry || !cfg_.policy.max_queue_entry_only);
        const auto limit = static_cast<std::size_t>(cfg_.policy.max_queue);
        const bool by_tier = throttled && heap_.tiers() > 1;
        if (by_tier) update_tier_fractions(t.admit_fraction);
        if (heap_.empty()) latest_pushed_ = std::numeric_limits<std::int64_t>::min();
        const auto admit = [&](const Request& r) {
            if (by_tier) {
                note_tier(r.tier);
                if (tier_total_ < 64.0) update_tier_fractions(t.admit_fraction);  // shares still forming
            }
            if (bounded && heap_.size() >= limit) {
                discard(drops, r, Reason::kRejected, is_cancelled);
            } else if (throttled && !(by_tier ? tier_throttle_[tier_index(r.tier)].admit(tier_fraction_[tier_index(r.tier)])
                                             : admission_.admit(t.admit_fraction))) {
                discard(drops, r, Reason::kRejected, is_cancelled);
            } else if (overloaded && !dagor_.admit(1.0 - cfg_.policy.dagor_alpha)) {
                discard(drops, r, Reason::kOverload, is_cancelled);
            } else {
                heap_.push(r);
                if (r.deadline_ns > latest_pushed_) latest_pushed_ = r.deadline_ns;
            }
        };
        if (!local_.empty()) {  // submit_local's buffer first (only the simulator fills it)
            for (const Request& r : local_) admit(r);
            local_.clear();
            local_size_.store(0, std::memory_order_relaxed);
        }
        Request r;
        while (ring_.try_pop(r)) admit(r);
    }

    [[nodiscard]] std::size_t tier_index(std::int32_t tier) const noexcept {
        return (tier < 0 || static_cast<std::size_t>(tier) >= tier_seen_.size()) ? 0 : static_cast<std::size_t>(tier);
    }

    // Recent arrival counts per tier, halved every 4096 arrivals (a cheap decaying share).
    void note_tier(std::int32_t tier) noexcept {
        tier_seen_[tier_index(tier)] += 1.0;
        if (++tier_total_ >= 4096.0) {
            for (double& c : tier_seen_) c *= 0.5;
            tier_total_ *= 0.5;
        }
    }

    // Per-tier admission shares that shed 1 - f of the input from the lowest-weight tiers first.
    void update_tier_fractions(double f) noexcept {
        double total = 0.0;
        for (double c : tier_seen_) total += c;
        const std::vector<double>& w = cfg_.tier_weights;
        // tiers from lowest weight up (ties: higher index first, the mirror of TieredQueue's order)
        std::vector<std::size_t>& order = tier_order_;
        if (order.size() != tier_seen_.size()) {
            order.resize(tier_seen_.size());
            for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
            std::stable_sort(order.begin(), order.end(), [&w](std::size_t a, std::size_t b) { return w[a] > w[b]; });
            std::reverse(order.begin(), order.end());
        }
        if (total <= 0.0) {
            for (double& x : tier_fraction_) x = f;
            return;
        }
        double shed = (1.0 - f) * total;
        for (std::size_t t : order) {
            const double c = tier_seen_[t];
            if (shed >= c) {
                tier_fraction_[t] = 0.0;
                shed -= c;
            } else {
                tier_fraction_[t] = c > 0.0 ? 1.0 - shed / c : 1.0;
                shed = 0.0;
            }
        }
    }

    // The small-queue fast path of form_batch. When everything queued is the owner's submit_local
    // buffer (heap and ring empty), holds at most kRunMax requests, and step 1 would push every one of
    // them (a single tier, no throttle, no bound, no dagor overload), and the rule has no step 2 or 2b
    // (not pard) and pops one request at a time (not nexus): the buffer is sorted by the heap's own
    // strict order (key, then id; insertion sort, as it arrives nearly in order) and the batch is
    // popped from its ends, pop_min from the front and pop_top from the back, so every request is
    // popped and judged exactly as from the heap; what the batch leaves goes into the heap. Saves a
    // push and a pop per request on the common short queue.
    static constexpr std::size_t kRunMax = 64;

    [[nodiscard]] bool run_eligible(const PublishedTerms& t) const noexcept {
        const DropRule rule = cfg_.policy.drop;
        if (local_.empty() || local_.size() > kRunMax || !heap_.empty() || !ring_.empty_approx()) return false;
        if (rule == DropRule::kPard || rule == DropRule::kNexus || heap_.tiers() > 1) return false;
        const bool throttled = rule != DropRule::kNone && t.admit_fraction < 1.0;
        const bool overloaded = rule == DropRule::kDagor && t.queue_delay_ns > cfg_.policy.dagor_threshold_ns;
        const bool bounded = cfg_.policy.max_queue > 0 && (cfg_.entry || !cfg_.policy.max_queue_entry_only);
        return !throttled && !overloaded && !bounded;
    }

    void take_run() {
        run_.swap(local_);
        local_.clear();
        local_size_.store(0, std::memory_order_relaxed);
        const StageKeyLess less{cfg_.policy.keyed_by_arrival()};
        for (std::size_t i = 1; i < run_.size(); ++i) {
            const Request r = run_[i];
            std::size_t j = i;
            for (; j > 0 && less(r, run_[j - 1]); --j) run_[j] = run_[j - 1];
            run_[j] = r;
        }
        run_lo_ = 0;
        run_hi_ = run_.size();
    }

    [[nodiscard]] bool queue_empty() const noexcept { return run_lo_ == run_hi_ && heap_.empty(); }

    Request pop(bool pop_max) {
        if (run_lo_ < run_hi_) return pop_max ? run_[--run_hi_] : run_[run_lo_++];  // the heap is empty meanwhile
        if (pop_max) return heap_.pop_top();
        // A tiered stage serves by tier weight in LBF too: EDF across tiers served a low tier's tighter
        // SLOs ahead of a high tier (a chain at 2x bursty load, gold 10 at 500 ms, silver 3 at 300 ms,
        // free 1 at 150 ms: 419 gold lost where FCFS clipper++ lost none; a new user's test, 2026-12-03).
        return by_tier_low_ ? heap_.pop_top_low() : heap_.pop_min();
    }

    // Pops until the batch is full or the heap is empty; verdict(r) returns a Reason code or -1 (keep).
    template <class IsCancelled, class Verdict>
    void pop_loop(BatchResult& out, bool pop_max, IsCancelled& is_cancelled, Verdict verdict,
                  std::size_t limit = static_cast<std::size_t>(-1)) {
        std::size_t max_b = static_cast<std::size_t>(cfg_.max_batch);
        if (limit < max_b) max_b = limit;
        while (out.batch.size() < max_b && !queue_empty()) {
            const Request r = pop(pop_max);
            if (is_cancelled(r.id)) {
                out.drops.push_back(Drop{r, Reason::kCancelled});
                continue;
            }
            const int v = verdict(r);
            if (v < 0) {
                out.batch.push_back(r);
            } else {
                out.drops.push_back(Drop{r, static_cast<Reason>(static_cast<std::uint8_t>(v))});
            }
        }
    }

    template <class IsCancelled>
    void nexus_window(BatchResult& out, bool pop_max, std::size_t b, std::int64_t t_e_ns, std::int64_t d,
                      IsCancelled& is_cancelled) {
        const double f = cfg_.budget_fraction;
        scratch_.clear();
        std::size_t run_start = 0;  // index in scratch_ where the current run of feasible requests starts
        bool found = false;
        while (!heap_.empty()) {
            const Request r = pop(pop_max);
            if (is_cancelled(r.id)) {
                out.drops.push_back(Drop{r, Reason::kCancelled});
                continue;
            }
            scratch_.push_back(r);
            if (!nexus_feasible(r, t_e_ns, d, f)) {
                run_start = scratch_.size();
            } else if (scratch_.size() - run_start == b) {
                found = true;
                break;
            }
        }
        if (found) {
            for (std::size_t i = 0; i < run_start; ++i) out.drops.push_back(Drop{scratch_[i], Reason::kWindow});
            out.batch.assign(scratch_.begin() + static_cast<std::ptrdiff_t>(run_start), scratch_.end());
            return;
        }
        for (const Request& r : scratch_) {
            if (!nexus_feasible(r, t_e_ns, d, f)) {
                out.drops.push_back(Drop{r, Reason::kWindow});
            } else if (out.batch.size() < b) {
                out.batch.push_back(r);
            } else {
                heap_.push(r);
            }
        }
    }

    const StageConfig cfg_;
    MpmcRing<Request> ring_;
    std::mutex mu_;  // the batch-forming lock: guards heap_, scratch_ and the admission throttles
    TieredQueue<StageKeyLess> heap_;
    std::vector<Request> scratch_;
    AdmissionThrottle admission_;
    AdmissionThrottle dagor_;
    std::vector<AdmissionThrottle> tier_throttle_;  // tiered admission: one throttle per tier
    std::vector<double> tier_seen_;                 // decaying arrival counts per tier
    std::vector<double> tier_fraction_;             // admitted share per tier
    std::vector<std::size_t> tier_order_;           // tiers, lowest weight first
    double tier_total_ = 0.0;
    std::atomic<std::size_t> heap_size_{0};
    std::atomic<std::int64_t> earliest_queued_{kNoDeadline};  // earliest_queued_deadline_ns()
    std::vector<std::atomic<std::size_t>> tier_size_;  // per tier, stored with heap_size_ (store_sizes)
    std::vector<std::int64_t> tier_thr_;               // tier_thresholds' output, per tier (under mu_)
    std::vector<std::int64_t> purge_thr_;              // purge_low_end's threshold, per tier (under mu_)
    std::vector<bool> outranks_;                       // per tier: some tier weighs less (tier_downstream_ns)
    bool by_tier_low_ = false;  // LBF pops the top tier's lowest budget (pop_top_low), not the global one
    std::atomic<bool> overloaded_{false};           // step 2b's test at the last batch (overloaded_now)
    std::atomic<std::int64_t> busy_until_ns_{std::numeric_limits<std::int64_t>::min()};  // busy_until_ns()
    bool parallel_ = false;                         // set_parallel: on a parallel DAG branch
    bool ranked_ = false;                           // the queue is keyed by rank now (sync_rank; mu_)
    std::uint64_t ranked_at_calm_ = 0;              // calm_publishes_ when ranked_ last changed (mu_)
    std::atomic<std::uint64_t> calm_publishes_{0};  // publishes that left the order other than HBF
    std::int64_t latest_pushed_ = std::numeric_limits<std::int64_t>::min();  // latest_deadline (mu_)
    std::vector<Request> rekey_scratch_;
    std::vector<const StageScheduler*> below_;      // set_below: the stages below, for below_signals
    std::vector<std::size_t> lag_plan_;               // below_lag_ns: below_ positions, leaves first (mu_)
    std::vector<std::vector<std::size_t>> lag_next_;  // ... each one's stages below, as below_ positions
    std::vector<std::int64_t> lag_path_;              // ... its longest summed lag path (scratch, mu_)
    std::atomic<std::int64_t> measured_sum_ns_{0};  // observe_batch: measured batch ns, ever
    std::atomic<std::int64_t> profiled_sum_ns_{0};  // ... and the profile's d_k(b) for the same batches
    std::vector<Request> local_;              // submit_local's buffer (single-threaded owners)
    std::vector<Request> run_;                // form_batch's sorted run (run_eligible), [run_lo_, run_hi_) unpopped
    std::size_t run_lo_ = 0, run_hi_ = 0;
    std::atomic<std::size_t> local_size_{0};  // its size, for queued() from other threads
    std::atomic<Order> order_;
    std::mutex publish_mu_;  // serialises publishers (hysteresis step + snapshot store)
    SnapshotCell terms_;
};

// For each stage k of a pipeline given by its successor lists, every stage reachable from k (k
// excluded), ascending: what StageScheduler::set_below takes. Throws std::invalid_argument on a
// successor index out of range; terminates on a cycle too (the pipelines refuse cycles elsewhere).
inline std::vector<std::vector<int>> stages_below(const std::vector<std::vector<int>>& successors) {
    const std::size_t n = successors.size();
    std::vector<std::vector<int>> below(n);
    for (std::size_t k = 0; k < n; ++k) {
        std::vector<char> seen(n, 0);
        std::vector<int> todo(successors[k].begin(), successors[k].end());
        while (!todo.empty()) {
            const int j = todo.back();
            todo.pop_back();
            if (j < 0 || static_cast<std::size_t>(j) >= n) {
                throw std::invalid_argument("stages_below: successor " + std::to_string(j) + " is out of range");
            }
            if (seen[static_cast<std::size_t>(j)] || static_cast<std::size_t>(j) == k) continue;
            seen[static_cast<std::size_t>(j)] = 1;
            for (int x : successors[static_cast<std::size_t>(j)]) todo.push_back(x);
        }
        for (std::size_t j = 0; j < n; ++j) if (seen[j]) below[k].push_back(static_cast<int>(j));
    }
    return below;
}

// For each stage of a pipeline given by its successor lists, whether it lies on one of several parallel
// branches: some other stage is neither above nor below it. Every request visits every stage and ends
// when all its exits have finished, so two such stages hold copies of the same requests, and each copy
// one serves that the other drops is wasted, whether the branches meet at a join or at the exits. What
// StageScheduler::set_parallel takes (Policy::coherent_rank).
inline std::vector<char> parallel_branches(const std::vector<std::vector<int>>& successors) {
    const auto below = stages_below(successors);
    const std::size_t n = successors.size();
    std::vector<std::vector<char>> related(n, std::vector<char>(n, 0));  // above, below or itself
    for (std::size_t k = 0; k < n; ++k) {
        related[k][k] = 1;
        for (int j : below[k]) {
            related[k][static_cast<std::size_t>(j)] = 1;
            related[static_cast<std::size_t>(j)][k] = 1;
        }
    }
    std::vector<char> out(n, 0);
    for (std::size_t k = 0; k < n; ++k) {
        for (std::size_t j = 0; j < n && !out[k]; ++j) out[k] = related[k][j] ? 0 : 1;
    }
    return out;
}

}  // namespace pard
