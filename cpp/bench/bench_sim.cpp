// cpp/bench/bench_sim.cpp — standalone: the simulator's event loop on the built-in lv pipeline.
//
// lv's five stages (profiles, max batches and workers as python/pard/pipelines/lv), 300 s of
// Poisson arrivals at 900 req/s (load 0.9, seeded), SLO 500 ms, jitter 0. Like pard.simulate, it
// advances one simulated second per run_until and takes every stage's statistics after each; with
// policy "pard" it also publishes fixed terms every second (the planner's place; no Python). It
// prints the best of the rounds in thread CPU time (robust on a shared machine) and a checksum of
// the per-request outcomes, so a change to the loop can be checked for identical results. No
// Python involved, so it is also the profiler's target:
//   g++ -std=c++17 -O3 -DNDEBUG -g -fno-omit-frame-pointer -Icpp/include cpp/bench/bench_sim.cpp -o build/bench_sim
//   build/bench_sim naive 5        # policy (naive | pard), rounds
//   perf record -g build/bench_sim pard 5 && perf report --no-children
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "pard/simulator.hpp"

namespace {

pard::Profile profile(const std::vector<std::int64_t>& b, const std::vector<double>& d_s) {
    std::vector<std::int64_t> d_ns;
    for (double d : d_s) d_ns.push_back(static_cast<std::int64_t>(d * 1e9 + 0.5));
    return pard::Profile(b, d_ns);
}

void add_stage(pard::SimConfig& cfg, const char* name, pard::Profile p, std::int64_t max_batch, int workers,
               std::vector<int> successors) {
    pard::SimStageConfig c;
    c.name = name;
    c.profile = std::move(p);
    c.max_batch = max_batch;
    c.workers = workers;
    c.successors = std::move(successors);
    c.budget_fraction = 0.2;
    cfg.stages.push_back(std::move(c));
}

double thread_cpu_s() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
    const std::string policy = argc > 1 ? argv[1] : "naive";
    const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
    pard::SimConfig cfg;
    add_stage(cfg, "person_detect", profile({1, 2, 4, 8, 16}, {0.017, 0.0209, 0.0281, 0.0409, 0.064}), 16, 4, {1});
    add_stage(cfg, "pose", profile({1, 2, 4, 8, 16}, {0.013, 0.0159, 0.0212, 0.0308, 0.048}), 16, 3, {2});
    add_stage(cfg, "face_detect", profile({1, 2, 4, 8, 16}, {0.007, 0.0089, 0.0124, 0.0187, 0.03}), 16, 2, {3});
    add_stage(cfg, "face_landmark", profile({1, 2, 4, 8, 16}, {0.003, 0.004, 0.0058, 0.0091, 0.015}), 16, 1, {4});
    add_stage(cfg, "expression", profile({1, 2, 4, 8, 16, 32}, {0.004, 0.0052, 0.0075, 0.0115, 0.0188, 0.032}), 32, 1,
              {});
    if (policy == "naive") {
        cfg.policy.order = pard::Order::kFcfs;
        cfg.policy.drop = pard::DropRule::kNone;
    } else if (policy == "pard") {
        cfg.policy.order = pard::Order::kAdaptive;
        cfg.policy.drop = pard::DropRule::kPard;
        cfg.policy.tiered = true;
        cfg.policy.reactive = true;
    } else {
        std::fprintf(stderr, "policy must be naive or pard, got %s\n", policy.c_str());
        return 2;
    }
    std::mt19937_64 rng(2);
    std::exponential_distribution<double> gap(900.0);
    for (double t = gap(rng); t < 300.0; t += gap(rng)) cfg.arrivals_ns.push_back(static_cast<std::int64_t>(t * 1e9));
    const std::size_t n = cfg.arrivals_ns.size();
    cfg.slo_ns.assign(n, 500'000'000);
    cfg.tier.assign(n, 0);
    cfg.jitter_cv = 0.0;

    double best = 1e30;
    std::uint64_t checksum = 0;
    for (int r = 0; r < rounds; ++r) {
        const double t0 = thread_cpu_s();
        pard::Simulator sim(cfg);
        pard::StageStats stats;
        std::uint64_t samples = 0;
        std::int64_t now = 0;
        for (bool more = true; more || now < cfg.arrivals_ns.back();) {
            now += 1'000'000'000;
            more = sim.run_until(now);
            for (std::size_t k = 0; k < sim.num_stages(); ++k) {
                sim.take_stats(k, stats);
                samples += stats.qdelay.size();
            }
            if (policy == "pard") {
                for (std::size_t k = 0; k < sim.num_stages(); ++k) {
                    pard::PublishedTerms t;
                    t.downstream_ns = static_cast<std::int64_t>(4 - k) * 30'000'000;
                    t.mu = 0.9;
                    t.eps = 0.2;
                    t.service_rate = 1000.0;
                    sim.publish(k, t);
                }
            }
        }
        const double dt = thread_cpu_s() - t0;
        if (dt < best) best = dt;
        checksum = samples;
        for (std::size_t i = 0; i < n; ++i) {
            checksum = checksum * 1000003u + static_cast<std::uint64_t>(sim.finish_ns()[i]) * 7u +
                       static_cast<std::uint64_t>(sim.states()[i]) + static_cast<std::uint64_t>(sim.compute_ns()[i]);
        }
    }
    std::printf("%s: %zu requests, best of %d rounds %.1f ms thread CPU, %.2f M req/s, checksum %016llx\n",
                policy.c_str(), n, rounds, best * 1e3, static_cast<double>(n) / best / 1e6,
                static_cast<unsigned long long>(checksum));
    return 0;
}
