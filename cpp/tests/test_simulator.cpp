// Standalone test of pard::Simulator: conservation and exact reproducibility on a jittered DAG with
// autoscaling churn under every drop rule, and the DAG cancel trace (a sibling copy discarded without
// compute). Plain checks that abort; run under ASan+UBSan by .ci.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "pard/simulator.hpp"

#include "check.hpp"

using namespace pard;

namespace {

constexpr std::int64_t kMs = 1'000'000;

SimStageConfig st(std::int64_t d1_ms, std::int64_t d8_ms, std::vector<int> succ, int workers = 2) {
    SimStageConfig c;
    c.profile = Profile({1, 8}, {d1_ms * kMs, d8_ms * kMs});
    c.max_batch = 8;
    c.workers = workers;
    c.successors = std::move(succ);
    c.budget_fraction = 0.3;
    return c;
}

SimConfig dag_config(DropRule drop, Order order, std::uint64_t seed) {
    SimConfig cfg;
    cfg.stages = {st(2, 8, {1, 2}), st(3, 12, {3}), st(4, 16, {3}), st(2, 8, {})};
    cfg.policy.drop = drop;
    cfg.policy.order = order;
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    const std::size_t n = 5000;
    std::int64_t t = 0;
    for (std::size_t i = 0; i < n; ++i) {
        t += static_cast<std::int64_t>(u(rng) * 1.0e6);  // ~2000 req/s: overloaded
        cfg.arrivals_ns.push_back(t);
        cfg.slo_ns.push_back(50 * kMs + static_cast<std::int64_t>(u(rng) * 200.0 * kMs));
        cfg.tier.push_back(0);
    }
    cfg.jitter_cv = 0.2;
    cfg.seed = seed;
    cfg.cold_start_ns = 200 * kMs;
    cfg.ring_capacity = 64;  // small: exercises the drain-on-full path
    return cfg;
}

std::vector<Outcome> run(DropRule drop, Order order, std::uint64_t seed, std::vector<std::int64_t>* finish) {
    Simulator sim(dag_config(drop, order, seed));
    StageStats stats;
    int k = 0;
    for (std::int64_t t = 0; sim.run_until(t); t += 100 * kMs, ++k) {
        for (std::size_t s = 0; s < sim.num_stages(); ++s) {
            sim.take_stats(s, stats);
            PublishedTerms terms;
            terms.downstream_ns = static_cast<std::int64_t>(3 - s) * 10 * kMs;
            terms.mu = 0.5 + 0.5 * (k % 3);
            terms.eps = 0.1;
            terms.queue_delay_ns = (k % 2) * 30 * kMs;
            sim.publish(s, terms);
        }
        sim.set_workers(2, 1 + k % 4);
    }
    if (finish) *finish = sim.finish_ns();
    return sim.states();
}

void test_conservation_and_determinism() {
    const DropRule rules[] = {DropRule::kNone, DropRule::kPard, DropRule::kClipper, DropRule::kNexus, DropRule::kDagor};
    for (DropRule r : rules) {
        const Order order = r == DropRule::kPard ? Order::kAdaptive : Order::kFcfs;
        std::vector<std::int64_t> fa, fb;
        const auto a = run(r, order, 11, &fa);
        const auto b = run(r, order, 11, &fb);
        CHECK(a == b && fa == fb);
        std::size_t counts[6] = {0, 0, 0, 0, 0, 0};
        for (Outcome o : a) ++counts[static_cast<int>(o)];
        CHECK(counts[0] == 0);  // nothing left pending
        CHECK(counts[1] + counts[2] + counts[3] + counts[4] + counts[5] == a.size());
        if (r == DropRule::kNone) CHECK(counts[3] == 0 && counts[4] == 0);
        if (r != DropRule::kNone) CHECK(counts[3] > 0);
    }
}

// 0 (10 ms) -> {1 (10 ms), 2 (100 ms)} -> 3 (10 ms); r1 dropped at stage 1 at 20 ms; its queued
// copy at stage 2 is discarded at 110 ms without compute.
void test_dag_cancel() {
    SimConfig cfg;
    for (std::int64_t d : {10, 10, 100, 10}) {
        SimStageConfig c;
        c.profile = Profile({1}, {d * kMs});
        c.max_batch = 1;
        cfg.stages.push_back(c);
    }
    cfg.stages[0].successors = {1, 2};
    cfg.stages[1].successors = {3};
    cfg.stages[2].successors = {3};
    cfg.policy.drop = DropRule::kPard;
    cfg.policy.order = Order::kLbf;
    cfg.arrivals_ns = {0, 1 * kMs};
    cfg.slo_ns = {300 * kMs, 200 * kMs};
    cfg.tier = {0, 0};
    cfg.jitter_cv = 0.0;
    Simulator sim(cfg);
    PublishedTerms t;
    t.downstream_ns = 185 * kMs;
    sim.publish(1, t);
    while (sim.run_until(sim.now_ns() + 1'000 * kMs)) {
    }
    CHECK(sim.states()[0] == Outcome::kOnTime && sim.finish_ns()[0] == 120 * kMs);
    CHECK(sim.states()[1] == Outcome::kDropped && sim.drop_stage()[1] == 1);
    CHECK(sim.drop_reason()[1] == static_cast<std::int32_t>(Reason::kInfeasible));
    CHECK(sim.compute_ns()[1] == static_cast<double>(10 * kMs));
    int stage2_batches = 0;
    for (std::int32_t s : sim.batches().stage) stage2_batches += s == 2 ? 1 : 0;
    CHECK(stage2_batches == 1);
}

}  // namespace

int main() {
    test_dag_cancel();
    test_conservation_and_determinism();
    std::puts("test_simulator: ok");
    return 0;
}
