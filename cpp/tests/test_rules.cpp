// Standalone tests of the stage scheduler's named rules (pard/rules/): each rule alone, on hand-computed
// values, with its edges (equal is kept, a lone request, an unknown rate, an empty set). Plain checks
// that abort; run under TSan and ASan with the other C++ tests.
#include <cstdint>
#include <cstdio>
#include <limits>
#include <vector>

#include "pard/batch.hpp"
#include "pard/profile.hpp"
#include "pard/rules/baseline_drops.hpp"
#include "pard/rules/coherent_rank.hpp"
#include "pard/rules/duration_scale.hpp"
#include "pard/rules/floor.hpp"
#include "pard/rules/llm_deadline.hpp"
#include "pard/rules/llm_queue_bound.hpp"
#include "pard/rules/nexus_window.hpp"
#include "pard/rules/order.hpp"
#include "pard/rules/overload.hpp"
#include "pard/rules/overload_upper.hpp"
#include "pard/rules/pacing.hpp"
#include "pard/rules/queue_lag.hpp"
#include "pard/rules/scorpio_ttft.hpp"
#include "pard/rules/tier_admission.hpp"
#include "pard/rules/tier_thresholds.hpp"
#include "pard/rules/virtual_queue.hpp"
#include "pard/rules/vllm_cap.hpp"
#include "pard/llm/stage_model.hpp"

#include "check.hpp"

using namespace pard;

namespace {

constexpr std::int64_t kMs = 1'000'000;

Request req(std::uint64_t id, std::int64_t deadline, std::int64_t arrival = 0, std::int32_t tier = 0) {
    return Request{id, 0, deadline, arrival, tier, 0};
}

// A stand-in for the stages below: what the cross-stage rules read of them.
struct FakeStage {
    bool overloaded = false;
    std::size_t queue = 0;
    std::int64_t busy_until = 0;
    [[nodiscard]] bool overloaded_now() const noexcept { return overloaded; }
    [[nodiscard]] std::size_t queued() const noexcept { return queue; }
    [[nodiscard]] std::int64_t busy_until_ns() const noexcept { return busy_until; }
};

void adaptive_order_has_a_hysteresis_band() {
    CHECK(rules::adaptive_order(Order::kLbf, 1.2, 0.1) == Order::kHbf);
    CHECK(rules::adaptive_order(Order::kHbf, 0.8, 0.1) == Order::kLbf);
    CHECK(rules::adaptive_order(Order::kHbf, 1.05, 0.1) == Order::kHbf);  // inside the band: kept
    CHECK(rules::adaptive_order(Order::kLbf, 1.05, 0.1) == Order::kLbf);
    CHECK(rules::adaptive_order(Order::kLbf, 1.1, 0.1) == Order::kLbf);   // 1 + eps itself is inside
    CHECK(rules::adaptive_order(Order::kHbf, 1.0, 0.0) == Order::kHbf);   // eps 0: mu 1 keeps the order
}

void duration_scale_rules() {
    CHECK(rules::scaled(10 * kMs, 1.0) == 10 * kMs);
    CHECK(rules::scaled(10 * kMs, 2.5) == 25 * kMs);
    CHECK(rules::scaled(3, 0.5) == 2);          // 1.5 rounds to nearest: 2
    CHECK(rules::scaled(10, 0.001) == 1);       // never below 1 ns
    CHECK(rules::own_duration_scale(0, 0) == 1.0);
    CHECK(rules::own_duration_scale(30, 10) == 3.0);
    CHECK(rules::own_duration_scale(1, 1'000'000'000) == kDurationScaleMin);
    CHECK(rules::own_duration_scale(1'000'000'000'000LL, 1) == kDurationScaleMax);
    PublishedTerms t;
    t.downstream_ns = 100;
    t.overload_downstream_ns = 200;
    t.floor_downstream_ns = 50;
    t.outrank_downstream_ns = 40;
    t.service_rate = 100.0;
    t.path_rate = 50.0;
    t.duration_scale = 0.0;
    const PublishedTerms s = rules::with_own_scale(t, 2.0);
    CHECK(s.duration_scale == 2.0 && s.downstream_ns == 200 && s.overload_downstream_ns == 400);
    CHECK(s.floor_downstream_ns == 100 && s.outrank_downstream_ns == 80);
    CHECK(s.service_rate == 50.0 && s.path_rate == 25.0);
    const PublishedTerms one = rules::with_own_scale(t, 1.0);
    CHECK(one.duration_scale == 1.0 && one.downstream_ns == 100 && one.service_rate == 100.0);
}

void overload_test_and_shed_count() {
    CHECK(!rules::overload_holds(1.0, 10.0, 0.0));     // a lone request never holds it
    CHECK(rules::overload_holds(2.0, 10.0, 0.1));      // 2 queued, 1 drains in 0.1 s
    CHECK(!rules::overload_holds(2.0, 10.0, 0.2));     // exactly drains: not overloaded
    CHECK(!rules::overload_holds(5.0, 100.0, 0.1));
    CHECK(rules::overload_holds(5.0, 100.0, -0.1));    // no slack at all
    // batches of 4 every 4 / 20 = 0.2 s: within 0.29 s two batches start (8), not the fluid 5.8
    CHECK(rules::startable(4, 20.0, 0.29) == 8.0);
    CHECK(rules::startable(4, 20.0, 0.0) == 4.0);      // the batch starting now
    CHECK(rules::startable(4, 20.0, 0.2) == 8.0);
    PublishedTerms t;
    t.duration_scale = 0.0;
    CHECK(!rules::may_shed(t));
    t.duration_scale = 1.0;
    CHECK(rules::may_shed(t));
}

void overload_upper_raises_only_upward() {
    PublishedTerms t;
    t.downstream_ns = 100;
    t.overload_downstream_ns = 300;
    CHECK(rules::raises(t));
    CHECK(rules::pop_downstream_ns(t, true) == 300);
    CHECK(rules::pop_downstream_ns(t, false) == 100);
    t.overload_downstream_ns = 50;
    CHECK(!rules::raises(t));
    CHECK(rules::pop_downstream_ns(t, true) == 100);
    FakeStage calm, busy;
    busy.overloaded = true;
    const std::vector<const FakeStage*> none, some{&calm, &busy}, quiet{&calm};
    CHECK(!rules::below_signals(BelowSignal::kNone, some));
    CHECK(rules::below_signals(BelowSignal::kOverloaded, some));
    CHECK(!rules::below_signals(BelowSignal::kOverloaded, quiet));
    CHECK(!rules::below_signals(BelowSignal::kOverloaded, none));
}

void floor_stands_in_for_a_self_refuting_forecast() {
    PublishedTerms t;
    t.downstream_ns = 100;
    t.floor_downstream_ns = 60;
    CHECK(rules::floor_applies(t));
    t.floor_downstream_ns = 100;
    CHECK(!rules::floor_applies(t));  // not below the published term
    t.floor_downstream_ns = 0;
    CHECK(!rules::floor_applies(t));  // none published
    CHECK(rules::refutes_itself(501, 500));
    CHECK(!rules::refutes_itself(500, 500));  // equal is kept (Eq. 3b)
    FakeStage idle, queued, running, overloaded;
    queued.queue = 1;
    running.busy_until = 1000;
    overloaded.overloaded = true;
    const std::vector<const FakeStage*> empty;
    CHECK(rules::below_idle(empty, 0));
    CHECK(rules::below_idle(std::vector<const FakeStage*>{&idle}, 0));
    CHECK(!rules::below_idle(std::vector<const FakeStage*>{&idle, &queued}, 0));
    CHECK(!rules::below_idle(std::vector<const FakeStage*>{&running}, 999));
    CHECK(rules::below_idle(std::vector<const FakeStage*>{&running}, 1000));  // done when the request arrives
    CHECK(!rules::below_idle(std::vector<const FakeStage*>{&overloaded}, 0));
}

void pacing_picks_the_smallest_batch_that_keeps_up() {
    const Profile prof({1, 16}, {10 * kMs, 40 * kMs});  // d(b) = 8 ms + 2 ms b
    PublishedTerms t;
    t.service_rate = 400.0;  // 16 / 40 ms
    t.path_rate = 0.0;
    CHECK(!rules::paced(true, t));          // no path rate published
    t.path_rate = 500.0;
    CHECK(!rules::paced(true, t));          // the path is faster
    t.path_rate = 200.0;
    CHECK(rules::paced(true, t) && !rules::paced(false, t));
    CHECK(rules::shed_rate(true, t) == 200.0 && rules::shed_rate(false, t) == 400.0);
    // half the full batch's 400 req/s: c / (8 + 2c) ms >= 0.2 per ms first at c = 3 (3 / 14 ms = 214/s)
    CHECK(rules::paced_batch(prof, 16, t, 16) == 3);
    CHECK(rules::paced_batch(prof, 16, t, 2) == 2);  // never more than what is queued
}

void tier_terms() {
    const std::vector<bool> out = rules::outranking_tiers({1.0, 4.0, 4.0});
    CHECK(!out[0] && out[1] && out[2]);
    CHECK(rules::outranking_tiers({2.0}).size() == 1 && !rules::outranking_tiers({2.0})[0]);
    PublishedTerms t;
    t.downstream_ns = 100;
    t.outrank_downstream_ns = 70;
    t.floor_downstream_ns = 80;
    CHECK(rules::tier_downstream_ns(t, false) == 100);
    CHECK(rules::tier_downstream_ns(t, true) == 70);
    t.outrank_downstream_ns = 0;
    CHECK(rules::tier_downstream_ns(t, true) == 80);   // the floor when no outrank term
    t.floor_downstream_ns = 120;
    CHECK(rules::tier_downstream_ns(t, true) == 100);  // never above the published term
}

void queue_lag_and_its_longest_path() {
    // 50 queued at 100 req/s: 0.5 s of backlog, less q 0.1 s and 0.2 s of transit
    CHECK(rules::queue_lag_ns(50, 100.0, 100 * kMs, 200 * kMs) == 200 * kMs);
    CHECK(rules::queue_lag_ns(5, 100.0, 100 * kMs, 0) == 0);  // never negative
    // stages 0 -> {1, 2}, 1 -> 2 (reachability): lags 10, 20, 5: longest 10 + 20 + 5 = 35
    rules::LongestLagPath paths;
    CHECK(!paths.planned());
    const std::vector<std::vector<bool>> under{{false, true, true}, {false, false, true}, {false, false, false}};
    paths.plan(3, [&](std::size_t i, std::size_t j) { return under[i][j]; },
               [&](std::size_t i) { return (under[i][0] ? 1 : 0) + (under[i][1] ? 1 : 0) + (under[i][2] ? 1 : 0); });
    CHECK(paths.planned());
    const std::int64_t lags[3] = {10, 20, 5};
    CHECK(paths.longest([&](std::size_t i) { return lags[i]; }) == 35);
    // a fork 0 -> {1, 2} with 1 and 2 unrelated: the larger branch
    rules::LongestLagPath fork;
    const std::vector<std::vector<bool>> f{{false, true, true}, {false, false, false}, {false, false, false}};
    fork.plan(3, [&](std::size_t i, std::size_t j) { return f[i][j]; },
              [&](std::size_t i) { return static_cast<int>(f[i][1]) + static_cast<int>(f[i][2]); });
    CHECK(fork.longest([&](std::size_t i) { return lags[i]; }) == 30);
    fork.clear();
    CHECK(!fork.planned());
}

void virtual_queue_counts_forwards_against_the_bottleneck_rate() {
    rules::VirtualQueue v;
    CHECK(v.backlog() == 0.0);
    for (int i = 0; i < 30; ++i) v.forwarded();
    CHECK(v.served_ns(0, 100.0) == 300 * kMs);  // 30 ahead at 100 req/s: served 0.3 s from now
    v.drain(100 * kMs, 100.0);                  // 0.1 s at 100 req/s: 10 served
    CHECK(v.backlog() > 19.999 && v.backlog() < 20.001);
    v.drain(50 * kMs, 100.0);  // a clock that steps back drains nothing
    CHECK(v.backlog() > 19.999 && v.backlog() < 20.001);
    v.anchor(25, false);  // never below what the stages down to the bottleneck hold
    CHECK(v.backlog() == 25.0);
    v.anchor(5, false);  // above them while the bottleneck works: what it dropped still counts
    CHECK(v.backlog() == 25.0);
    v.anchor(0, true);  // an idle bottleneck with nothing on the way: nothing ahead
    CHECK(v.backlog() == 0.0);
    v.forwarded();
    v.drain(10'000 * kMs, 100.0);  // never negative
    CHECK(v.backlog() == 0.0);
    rules::InFlight flight;  // taken into batches, less those seen to end
    flight.taken(8);
    flight.finished(3);
    CHECK(flight.count() == 5);
    flight.finished(9);  // more ended than taken (a batch observed by hand): none, never wrapped
    CHECK(flight.count() == 0);
    rules::TierBacklog tiers;  // tier 1 weighs 4, tier 0 1: the rate drains tier 1 first
    tiers.weights({1.0, 4.0});
    for (int i = 0; i < 5; ++i) tiers.forwarded(0);
    for (int i = 0; i < 3; ++i) tiers.forwarded(1);
    tiers.drain(20 * kMs, 100.0, 8.0);  // 2 served, both of tier 1
    CHECK(tiers.ahead(1, 6.0) > 0.999 && tiers.ahead(1, 6.0) < 1.001);
    CHECK(tiers.ahead(7, 6.0) == 6.0);  // an unknown tier code is tier 0's, the lightest
    CHECK(tiers.ahead(0, 6.0) == 6.0);  // the lightest tier: the whole backlog
    tiers.drain(20 * kMs, 100.0, 3.0);  // the whole fell to 3 (the anchor): the parts shrink with it
    CHECK(tiers.ahead(1, 3.0) > 0.499 && tiers.ahead(1, 3.0) < 0.501);
    rules::TierBacklog one;  // one tier: no split
    one.weights({1.0});
    one.forwarded(0);
    CHECK(one.ahead(0, 7.0) == 7.0);
    // leaving at 20 ms, the backlog served at 300 ms, the bottleneck's batch 45 ms, 10 ms below it
    CHECK(rules::virtual_queue_threshold(20 * kMs, 300 * kMs, 45 * kMs, 10 * kMs) == 355 * kMs);
    // no backlog: the request starts at the bottleneck when it gets there
    CHECK(rules::virtual_queue_threshold(20 * kMs, 5 * kMs, 45 * kMs, 0) == 65 * kMs);
}

// A stage as VirtualQueueGate reads it: its published terms, queue, d(B), the stages below and its own gate.
struct GateStage {
    struct Config {
        std::int64_t max_batch = 8;
        bool llm = false;
    };
    PublishedTerms terms;
    std::size_t waiting = 0;
    std::int64_t d_full_ns = 80 * kMs;
    Config cfg;
    std::vector<const GateStage*> below_;
    rules::VirtualQueueGate vq_;
    [[nodiscard]] PublishedTerms effective_terms() const { return terms; }
    [[nodiscard]] std::size_t queued() const { return waiting; }
    [[nodiscard]] std::int64_t expected_duration_ns(std::int64_t) const { return d_full_ns; }
    [[nodiscard]] const Config& config() const { return cfg; }
};

void virtual_queue_gate_keeps_the_bottleneck_fed_and_marks_it_paced() {
    GateStage bn;
    bn.terms.service_rate = 100.0;  // 100 req/s at full batches, d(B) 80 ms: the floor is 2 x 8 = 16 requests
    bn.waiting = 10;                // 10 queued there, none in batches: the backlog is anchored to 10 (0.1 s)
    const std::vector<const GateStage*> below{&bn};
    rules::VirtualQueueGate entry, other;
    const auto shed = static_cast<int>(Reason::kShed);
    entry.begin(true, 200.0, below, 0, {1.0, 4.0});  // two tiers: index 1 the heavier
    CHECK(!bn.vq_.paced());  // no batch has ended there: its rate is the profile's word alone
    bn.vq_.flight.finished(0);
    entry.begin(true, 200.0, below, 0, {1.0, 4.0});
    CHECK(bn.vq_.paced());
    // leaving at 10 ms: a request forwarded now starts at 100 ms and ends at 180 ms; a deadline of 150 ms
    // misses, yet 10 + 6 forwards stay within the floor, so the first 6 such go on; the 7th is shed
    for (std::uint64_t i = 0; i < 6; ++i) CHECK(entry.verdict(false, req(i, 150 * kMs), 10 * kMs, 0) == -1);
    CHECK(entry.verdict(false, req(6, 150 * kMs), 10 * kMs, 0) == shed);
    // a tier that outranks another is served ahead of the lower tiers' backlog: it counts only its own (none
    // yet), so 150 ms is met; then one of its own ahead, and a deadline under that batch's end is shed
    CHECK(entry.verdict(false, req(60, 150 * kMs, 0, 1), 10 * kMs, 0) == -1);
    CHECK(entry.verdict(false, req(61, 50 * kMs, 0, 1), 10 * kMs, 0) == shed);
    CHECK(entry.verdict(false, req(7, 10'000 * kMs), 10 * kMs, 0) == -1);  // ample slack: forwarded
    CHECK(entry.verdict(true, req(8, 10'000 * kMs), 10 * kMs, 0) == static_cast<int>(Reason::kInfeasible));
    other.begin(true, 200.0, below, 0);  // two entries pace it: a count
    entry.begin(false, 200.0, below, 1);
    CHECK(bn.vq_.paced());
    CHECK(entry.verdict(false, req(9, 150 * kMs), 10 * kMs, 1) == -1);  // off: every verdict forwards
    other.begin(true, 90.0, below, 2);  // the stage below is no slower than 0.95 of this entry: none paced
    CHECK(!bn.vq_.paced());
}

void virtual_queue_gate_keeps_a_tied_bottleneck_and_resets_on_a_switch() {
    GateStage a, b;  // two branches below one entry; d(B) 10 ms, so the floor is about two requests
    a.d_full_ns = b.d_full_ns = 10 * kMs;
    a.terms.service_rate = 100.0;
    b.terms.service_rate = 102.0;
    a.waiting = 10;
    b.waiting = 5;
    a.vq_.flight.finished(0);  // both have run a batch
    b.vq_.flight.finished(0);
    const std::vector<const GateStage*> below{&a, &b};
    rules::VirtualQueueGate entry;
    const auto shed = static_cast<int>(Reason::kShed);
    entry.begin(true, 200.0, below, 0);  // a is the slowest
    CHECK(a.vq_.paced() && !b.vq_.paced());
    for (std::uint64_t i = 0; i < 20; ++i) CHECK(entry.verdict(false, req(i, 10'000 * kMs), 10 * kMs, 0) == -1);
    a.terms.service_rate = 103.0;  // b is now the least, but within 5 %: a stays the bottleneck
    entry.begin(true, 200.0, below, 1);
    CHECK(a.vq_.paced() && !b.vq_.paced());
    // 30 ahead at 103 req/s end at about 300 ms: a deadline of 80 ms misses
    CHECK(entry.verdict(false, req(20, 80 * kMs), 10 * kMs, 1) == shed);
    b.terms.service_rate = 90.0;  // clearly slower: the backlog counts against b, from what b holds (5)
    entry.begin(true, 200.0, below, 2);
    CHECK(b.vq_.paced() && !a.vq_.paced());
    // 5 ahead at 90 req/s: starts at 56 ms, ends at 66 ms; a's 30 no longer count
    CHECK(entry.verdict(false, req(21, 80 * kMs), 10 * kMs, 2) == -1);
    b.cfg.llm = true;  // an llm stage paces in tokens: no virtual queue against it
    entry.begin(true, 200.0, below, 3);
    CHECK(!a.vq_.paced() && !b.vq_.paced());
    CHECK(entry.verdict(false, req(22, 1 * kMs), 10 * kMs, 3) == -1);
}

void coherent_rank_is_shared_and_switches_with_overload() {
    CHECK(rules::coherent_rank(7) == rules::coherent_rank(7));
    CHECK(rules::coherent_rank(7) >= 0 && rules::coherent_rank(~0ULL) >= 0);
    int below = 0;  // ranks spread: about half of 1000 ids rank below the median of int64
    for (std::uint64_t id = 0; id < 1000; ++id) below += rules::coherent_rank(id) < (INT64_MAX / 2) ? 1 : 0;
    CHECK(below > 400 && below < 600);
    CHECK(rules::want_ranked(false, true, false, 5, 0));   // HBF published: rank
    CHECK(rules::want_ranked(false, false, true, 5, 0));   // own overload test fired: rank
    CHECK(!rules::want_ranked(false, false, false, 5, 0));
    CHECK(rules::want_ranked(true, false, false, 5, 5));   // no calm publish since the switch: stay
    CHECK(!rules::want_ranked(true, false, true, 6, 5));   // a calm publish since: leave
}

void tier_admission_sheds_the_lowest_tiers_first() {
    rules::TierAdmission a(2);
    const std::vector<double> w{1.0, 4.0};
    a.update(0.5, w);  // nothing seen yet: every tier at the share
    CHECK(a.fractions()[0] == 0.5 && a.fractions()[1] == 0.5);
    for (int i = 0; i < 10; ++i) {
        a.note(0, 0.5, w);
        a.note(1, 0.5, w);
    }
    a.update(0.5, w);  // equal arrivals, half refused: all of tier 0
    CHECK(a.fractions()[0] == 0.0 && a.fractions()[1] == 1.0);
    int admitted0 = 0, admitted1 = 0;
    for (int i = 0; i < 10; ++i) {
        admitted0 += a.admit(0) ? 1 : 0;
        admitted1 += a.admit(1) ? 1 : 0;
    }
    CHECK(admitted0 == 0 && admitted1 == 10);
    CHECK(a.index(-1) == 0 && a.index(7) == 0 && a.index(1) == 1);
}

void baselines_judge_at_the_batch_start() {
    const Request r = req(1, 100 * kMs, 20 * kMs);  // slo 100 ms (send 0), at the stage since 20 ms
    CHECK(rules::baseline_verdict(DropRule::kRayServe, r, 100 * kMs, 1.0) == -1);  // at the deadline: kept
    CHECK(rules::baseline_verdict(DropRule::kRayServe, r, 101 * kMs, 1.0) == static_cast<int>(Reason::kExpired));
    CHECK(rules::baseline_verdict(DropRule::kDagor, r, 101 * kMs, 1.0) == static_cast<int>(Reason::kExpired));
    CHECK(rules::baseline_verdict(DropRule::kTriton, r, 120 * kMs, 1.0) == -1);  // 100 ms since arrival
    CHECK(rules::baseline_verdict(DropRule::kTriton, r, 121 * kMs, 1.0) == static_cast<int>(Reason::kTimeout));
    CHECK(rules::baseline_verdict(DropRule::kClipper, r, 71 * kMs, 0.5) == static_cast<int>(Reason::kStageBudget));
    CHECK(rules::baseline_verdict(DropRule::kClipper, r, 70 * kMs, 0.5) == -1);
    CHECK(rules::baseline_verdict(DropRule::kNone, r, 1000 * kMs, 1.0) == -1);
}

void nexus_window_takes_the_first_feasible_run() {
    // b = 2, d = 10 ms, t_e = 0, stage budget = slo (fraction 1): feasible iff 10 ms - arrival <= deadline
    std::vector<Request> q{req(1, 5 * kMs), req(2, 50 * kMs), req(3, 5 * kMs), req(4, 50 * kMs), req(5, 50 * kMs),
                           req(6, 50 * kMs)};
    std::size_t next = 0;
    std::vector<Request> back, scratch;
    BatchResult out;
    auto none = [](std::uint64_t) { return false; };
    rules::nexus_window(out, scratch, 2, 0, 10 * kMs, 1.0, [&] { return q[next++]; }, [&] { return next == q.size(); },
                        none, [&](const Request& r) { back.push_back(r); });
    CHECK(out.batch.size() == 2 && out.batch[0].id == 4 && out.batch[1].id == 5);
    CHECK(out.drops.size() == 3 && out.drops[0].request.id == 1 && out.drops[2].request.id == 3);
    CHECK(out.drops[1].reason == Reason::kWindow && next == 5 && back.empty());
    // no full run: the infeasible dropped, the first b feasible taken, the rest put back
    std::vector<Request> q2{req(1, 50 * kMs), req(2, 5 * kMs), req(3, 50 * kMs), req(4, 5 * kMs), req(5, 50 * kMs)};
    next = 0;
    BatchResult out2;
    rules::nexus_window(out2, scratch, 2, 0, 10 * kMs, 1.0, [&] { return q2[next++]; },
                        [&] { return next == q2.size(); }, none, [&](const Request& r) { back.push_back(r); });
    CHECK(out2.batch.size() == 2 && out2.batch[0].id == 1 && out2.batch[1].id == 3);
    CHECK(out2.drops.size() == 2 && back.size() == 1 && back[0].id == 5);
    // a cancelled request is dropped as cancelled, not scanned
    std::vector<Request> q3{req(9, 50 * kMs), req(10, 50 * kMs), req(11, 50 * kMs)};
    next = 0;
    BatchResult out3;
    auto nine = [](std::uint64_t id) { return id == 9; };
    rules::nexus_window(out3, scratch, 2, 0, 10 * kMs, 1.0, [&] { return q3[next++]; },
                        [&] { return next == q3.size(); }, nine, [&](const Request& r) { back.push_back(r); });
    CHECK(out3.batch.size() == 2 && out3.drops.size() == 1 && out3.drops[0].reason == Reason::kCancelled);
}

// vllm: the cap is max_seqs x ceil(slo / mean request time), at least one batch; an arrival past it is rejected.
void vllm_cap_counts_batches_within_the_slo() {
    CHECK(rules::vllm_queue_cap(64, 10'000 * kMs, 3'000 * kMs) == 64 * 4);  // ceil(10 / 3) = 4 batches
    CHECK(rules::vllm_queue_cap(64, 9'000 * kMs, 3'000 * kMs) == 64 * 3);   // exact: 3
    CHECK(rules::vllm_queue_cap(8, 1 * kMs, 3'000 * kMs) == 8);             // a request longer than the SLO: one batch
    CHECK(rules::vllm_queue_cap(8, 1 * kMs, 0) == 8);                       // unknown time: one batch
    CHECK(!rules::vllm_rejects(7, 8) && rules::vllm_rejects(8, 8));         // the 9th waiting request is refused
}

// vllm's token side: the request cap's requests at the running mean prompt; either cap full rejects.
void vllm_token_cap_is_the_request_cap_at_the_mean_prompt() {
    CHECK(rules::vllm_token_cap(256, 500.0) == 128'000);
    CHECK(rules::vllm_token_cap(256, 0.0) == std::numeric_limits<std::int64_t>::max());  // no finished request yet
    CHECK(rules::vllm_token_cap(8, 0.25) == 8);                                           // at least a token each
    CHECK(!rules::vllm_tokens_reject(120'000, 8'000, 128'000));                          // fills it exactly: kept
    CHECK(rules::vllm_tokens_reject(120'000, 8'001, 128'000));
    CHECK(!rules::vllm_tokens_reject(0, 500'000, 128'000));  // an empty queue takes any prompt
}

// The LLM queue bound in work: drain time = work / workers; over when it exceeds the largest slack (n > 1);
// the last served misses when the rest's drain, its cost and the terms below pass its deadline.
void llm_queue_bound_counts_work() {
    CHECK(rules::llm_drain_ns(900 * kMs, 3) == 300 * kMs && rules::llm_drain_ns(900 * kMs, 0) == 900 * kMs);
    CHECK(!rules::llm_queue_over(1, 10'000 * kMs, 1 * kMs));  // a lone request: nothing ahead of it
    CHECK(rules::llm_queue_over(2, 300 * kMs + 1, 300 * kMs) && !rules::llm_queue_over(2, 300 * kMs, 300 * kMs));
    // now 100 ms, the rest drains in 200 ms, its own cost 150 ms, 50 ms below: finish at 500 ms
    CHECK(!rules::llm_last_misses(req(1, 500 * kMs), 100 * kMs, 200 * kMs, 150 * kMs, 50 * kMs));
    CHECK(rules::llm_last_misses(req(1, 500 * kMs - 1), 100 * kMs, 200 * kMs, 150 * kMs, 50 * kMs));
}

// scorpio: rejects iff the first token (t_e + prefill) falls after the deadline; equal is kept.
void scorpio_judges_the_first_token() {
    CHECK(!rules::scorpio_rejects(req(1, 100 * kMs), 90 * kMs, 10 * kMs));
    CHECK(rules::scorpio_rejects(req(1, 100 * kMs), 90 * kMs, 10 * kMs + 1));
}

// pard at an LLM stage: admission adds the request's own cost; decode-time counts the steps left.
void llm_deadline_rules() {
    CHECK(!rules::llm_drops(req(1, 500 * kMs), 300 * kMs, 200 * kMs) && rules::llm_drops(req(1, 500 * kMs), 300 * kMs, 200 * kMs + 1));
    // 10 steps of 11 ms left at 100 ms, 50 ms below: finish 260 ms
    CHECK(!rules::llm_decode_stops(req(1, 260 * kMs), 100 * kMs, 10, 11 * kMs, 50 * kMs));
    CHECK(rules::llm_decode_stops(req(1, 260 * kMs - 1), 100 * kMs, 10, 11 * kMs, 50 * kMs));
    // the cost model: prefill(in) + q x step(n); one token while nothing has finished; the mean after
    llm::LlmStageSpec sp;
    sp.prefill_base_ns = 12 * kMs;
    sp.prefill_per_token_ns = 80'000.0;  // 0.08 ms per token
    sp.decode = Profile({1, 8}, {11 * kMs, 12 * kMs});
    sp.max_seqs = 8;
    sp.kv_tokens = 10'000;
    sp.max_output_tokens = 100;
    Request r = req(1, 0);
    r.in_tokens = 50;
    CHECK(sp.prefill_ns(50) == 16 * kMs && sp.reservation(r) == 150);
    r.max_tokens = 20;
    CHECK(sp.cap(r) == 20 && sp.reservation(r) == 70);
    llm::LlmCost mean(sp, false, 0.5, 1);
    CHECK(mean.cost_ns(r, 1) == 12 * kMs + 11 * kMs);  // no finished request: no mean input, one token
    for (int i = 0; i < 40; ++i) {
        Request f = req(static_cast<std::uint64_t>(i), 0);
        f.in_tokens = 100;
        mean.observe(f, 30);
    }
    CHECK(mean.predicted_len(r) == 30 && mean.prefill_ns(r) == 20 * kMs);  // the means, whatever r says
    CHECK(mean.cost_ns(r, 8) == 20 * kMs + 30 * 12 * kMs);
    CHECK(mean.predicted_len(r, 45) == 46);  // never at or below what is already out
}

}  // namespace

int main() {
    adaptive_order_has_a_hysteresis_band();
    duration_scale_rules();
    overload_test_and_shed_count();
    overload_upper_raises_only_upward();
    floor_stands_in_for_a_self_refuting_forecast();
    pacing_picks_the_smallest_batch_that_keeps_up();
    tier_terms();
    queue_lag_and_its_longest_path();
    virtual_queue_counts_forwards_against_the_bottleneck_rate();
    virtual_queue_gate_keeps_the_bottleneck_fed_and_marks_it_paced();
    virtual_queue_gate_keeps_a_tied_bottleneck_and_resets_on_a_switch();
    coherent_rank_is_shared_and_switches_with_overload();
    tier_admission_sheds_the_lowest_tiers_first();
    baselines_judge_at_the_batch_start();
    nexus_window_takes_the_first_feasible_run();
    vllm_cap_counts_batches_within_the_slo();
    vllm_token_cap_is_the_request_cap_at_the_mean_prompt();
    llm_queue_bound_counts_work();
    scorpio_judges_the_first_token();
    llm_deadline_rules();
    std::printf("test_rules: ok\n");
    return 0;
}
