// cpp/bench/bench_output_length.cpp — standalone: what OutputLengthPredictor costs per call.
//
// 2^20 synthetic finished requests (input tokens log-uniform in [16, 8192], 4 tiers, output tokens
// log-normal around 150, capped at 1024) are observed; a quantile is asked at admission (generated 0)
// and during decode (generated uniform below the request's own length) for each, p = 0.7. The anchor,
// timed in the same run, is what a DNN stage reads instead: Profile::duration_ns(b) of a 4-point profile.
// Prints the best of the rounds in thread CPU time (robust on a shared machine) per call, and a checksum.
//   g++ -std=c++17 -O3 -DNDEBUG -Icpp/include cpp/bench/bench_output_length.cpp -o build/bench_output_length
//   build/bench_output_length 5        # rounds
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <vector>

#include "pard/llm/output_length.hpp"
#include "pard/profile.hpp"

namespace {

double cpu_s() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Sample {
    std::int32_t in, tier, out, generated;
};

std::vector<Sample> samples(std::size_t n) {
    std::mt19937_64 rng(42);
    std::uniform_real_distribution<double> log_in(std::log(16.0), std::log(8192.0));
    std::lognormal_distribution<double> out(std::log(150.0), 0.9);
    std::vector<Sample> v(n);
    for (auto& s : v) {
        s.in = static_cast<std::int32_t>(std::exp(log_in(rng)));
        s.tier = static_cast<std::int32_t>(rng() % 4);
        s.out = std::clamp(static_cast<std::int32_t>(out(rng)), 1, 1024);
        s.generated = static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(s.out));
    }
    return v;
}

}  // namespace

int main(int argc, char** argv) {
    const int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
    const auto v = samples(std::size_t{1} << 20);
    const pard::Profile profile({1, 8, 32, 64}, {11'000'000, 12'000'000, 15'000'000, 19'000'000});
    double best_observe = 1e9, best_admit = 1e9, best_decode = 1e9, best_profile = 1e9;
    std::int64_t checksum = 0;
    for (int r = 0; r < rounds; ++r) {
        pard::llm::OutputLengthConfig cfg;
        cfg.tiers = 4;
        pard::llm::OutputLengthPredictor pred(cfg);
        double t0 = cpu_s();
        for (const auto& s : v) pred.observe(s.in, s.tier, s.out);
        best_observe = std::min(best_observe, cpu_s() - t0);
        std::int64_t sum = 0;
        t0 = cpu_s();
        for (const auto& s : v) sum += pred.quantile(s.in, s.tier, 0, 0.7);
        best_admit = std::min(best_admit, cpu_s() - t0);
        t0 = cpu_s();
        for (const auto& s : v) sum += pred.quantile(s.in, s.tier, 0, 0.7, s.generated);
        best_decode = std::min(best_decode, cpu_s() - t0);
        t0 = cpu_s();
        for (const auto& s : v) sum += profile.duration_ns(1 + s.out % 64);
        best_profile = std::min(best_profile, cpu_s() - t0);
        checksum = sum;
    }
    const double n = static_cast<double>(v.size()) * 1e-9;
    std::printf("per call (ns, best of %d rounds, %zu calls each): observe %.1f, quantile at admission %.1f, "
                "quantile during decode %.1f; anchor Profile::duration_ns %.1f; checksum %lld\n",
                rounds, v.size(), best_observe / n, best_admit / n, best_decode / n, best_profile / n,
                static_cast<long long>(checksum));
    return 0;
}
