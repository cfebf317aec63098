// cpp/bench/bench_depq.cpp — standalone: pard::RequestDepq vs std::priority_queue of the same key.
//
// Prints, for n = 10^3, 10^4, 10^5 and both ends, the median ns per push+pop pair of each queue
// over interleaved rounds and the median of the per-round ratios (DEPQ / std). No Python involved,
// so it also serves as the profiler's target:
//   g++ -std=c++17 -O3 -DNDEBUG -g -Icpp/include cpp/bench/bench_depq.cpp -o build/bench_depq
//   build/bench_depq                       # the table
//   build/bench_depq 10000 min 50000 41         # one configuration
//   build/bench_depq 10000 min 200000 1 depq    # one queue alone (depq or std), for a profiler:
//   valgrind --tool=callgrind build/bench_depq 10000 min 200000 1 depq
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "depq_vs_std.hpp"

namespace {

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t k = v.size() / 2;
    return v.size() % 2 == 1 ? v[k] : 0.5 * (v[k - 1] + v[k]);
}

// One queue alone: prints its median ns per pair.
int alone(std::size_t n, bool low, std::size_t ops, int rounds, pard::bench::Only only) {
    const pard::bench::DepqVsStd r = pard::bench::depq_vs_std(n, ops, low, rounds, only);
    std::printf("%.1f ns per pair (checksum %llu)\n", median(only == pard::bench::Only::kDepq ? r.depq_ns : r.std_ns),
                static_cast<unsigned long long>(r.checksum));
    return 0;
}

int report(std::size_t n, bool low, std::size_t ops, int rounds) {
    const pard::bench::DepqVsStd r = pard::bench::depq_vs_std(n, ops, low, rounds);
    if (r.checksum == 0) {
        std::fprintf(stderr, "n=%zu %s: the DEPQ and std::priority_queue popped different elements\n", n,
                     low ? "min" : "max");
        return 1;
    }
    std::vector<double> ratio(r.depq_ns.size());
    for (std::size_t i = 0; i < ratio.size(); ++i) ratio[i] = r.depq_ns[i] / r.std_ns[i];
    std::printf("| %7zu | %s | %8.1f | %8.1f | %5.2fx | %5.2fx-%5.2fx |\n", n, low ? "min" : "max",
                median(r.depq_ns), median(r.std_ns), median(ratio), *std::min_element(ratio.begin(), ratio.end()),
                *std::max_element(ratio.begin(), ratio.end()));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc == 6) {  // one queue alone: n end ops rounds depq|std
        const bool depq = std::string(argv[5]) == "depq";
        return alone(std::strtoull(argv[1], nullptr, 10), std::string(argv[2]) == "min",
                     std::strtoull(argv[3], nullptr, 10), std::atoi(argv[4]),
                     depq ? pard::bench::Only::kDepq : pard::bench::Only::kStd);
    }
    if (argc == 5) {  // one configuration: n end ops rounds
        return report(std::strtoull(argv[1], nullptr, 10), std::string(argv[2]) == "min",
                      std::strtoull(argv[3], nullptr, 10), std::atoi(argv[4]));
    }
    std::printf("| n | end | DEPQ ns/pair | std ns/pair | ratio (median of rounds) | ratio range |\n");
    std::printf("|---|---|---|---|---|---|\n");
    int rc = 0;
    for (std::size_t n : {std::size_t{1000}, std::size_t{10000}, std::size_t{100000}}) {
        for (bool low : {true, false}) rc |= report(n, low, 50000, 41);
    }
    return rc;
}
