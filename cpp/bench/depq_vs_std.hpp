// cpp/bench/depq_vs_std.hpp — the DEPQ against std::priority_queue of the same key, interleaved.
//
// Both queues start with the same n random keys and then see the same stream: `ops` times, push
// one key and pop one from the measured end. pard::RequestDepq holds 48-byte Requests and pops
// from either end; the baseline is a std::priority_queue of the 16-byte (deadline_ns, id) key it
// orders by, arranged so that its top is the end measured (a min-heap for "min", a max-heap for
// "max"). Rounds alternate which queue runs first, so both see the same machine state (load,
// frequency) within a round; the per-round ratio is what the bench reports. Each block is timed by
// the thread's CPU clock where POSIX has one (time spent descheduled on a shared machine does not
// count; cache pollution by other processes still does), else by the steady clock.
// Used by src/bench/register_bench.cpp (pard._core_bench, pytest bench) and cpp/bench/bench_depq.cpp (standalone, profiler).
#pragma once

#include <chrono>
#include <ctime>
#include <cstddef>
#include <cstdint>
#include <queue>
#include <random>
#include <vector>

#include "pard/depq.hpp"
#include "pard/request.hpp"

namespace pard::bench {

struct DepqVsStd {
    std::vector<double> depq_ns;  // per round: ns per (push + pop) pair of the DEPQ
    std::vector<double> std_ns;   // per round: ns per (push + pop) pair of std::priority_queue
    std::uint64_t checksum = 0;   // sum of popped ids; equal for both queues (same pops)
};

// Which queues to run: both, interleaved (the measurement), or one alone (for a profiler).
enum class Only { kBoth, kDepq, kStd };

namespace detail {

struct StdKey {
    std::int64_t deadline_ns;
    std::uint64_t id;
};
// "a comes out after b": a max-heap by (deadline, id) pops the max; its reverse pops the min.
struct KeyBelow {
    bool operator()(const StdKey& a, const StdKey& b) const noexcept {
        return a.deadline_ns < b.deadline_ns || (a.deadline_ns == b.deadline_ns && a.id < b.id);
    }
};
struct KeyAbove {
    bool operator()(const StdKey& a, const StdKey& b) const noexcept { return KeyBelow{}(b, a); }
};

template <class Cmp>
using StdQueue = std::priority_queue<StdKey, std::vector<StdKey>, Cmp>;

inline double now_ns() noexcept {
#if defined(CLOCK_THREAD_CPUTIME_ID)
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
#else
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now().time_since_epoch()).count();
#endif
}

// Deadlines in [0, 2^30) ns: the stream's key for id x, a splitmix64 hash (a few multiplies, the
// same for both queues). Fresh keys, unlike a recycled table, do not pile up duplicates in the
// queue (under pop_min the largest keys stay; a table would re-insert each of them every lap).
constexpr std::int64_t kMaxDeadline = (std::int64_t{1} << 30) - 1;
inline std::int64_t stream_key(std::uint64_t x) noexcept {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return static_cast<std::int64_t>(x >> 34);
}

template <class F>
double ns_per_op(std::size_t ops, F&& f) {
    const double t0 = now_ns();
    f();
    return (now_ns() - t0) / static_cast<double>(ops);
}

template <class Cmp>
DepqVsStd run(std::size_t n, std::size_t ops, bool low, int rounds, std::uint64_t seed, Only only) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::int64_t> deadline(0, kMaxDeadline);
    RequestDepq q;
    q.reserve(n + 1);
    std::vector<StdKey> init;
    init.reserve(n + 1);
    for (std::size_t i = 0; i < n; ++i) {
        const std::int64_t d = deadline(rng);
        q.push(Request{i, 0, d, 0, 0, 0});
        init.push_back(StdKey{d, i});
    }
    StdQueue<Cmp> s(Cmp{}, std::move(init));

    DepqVsStd out;
    std::uint64_t next_q = n;  // next id (and key-table cursor) of each queue's stream
    std::uint64_t next_s = n;
    std::uint64_t sum_q = 0;
    std::uint64_t sum_s = 0;
    auto run_depq = [&] {
        return ns_per_op(ops, [&] {
            for (std::size_t i = 0; i < ops; ++i, ++next_q) {
                q.push(Request{next_q, 0, stream_key(next_q), 0, 0, 0});
                sum_q += (low ? q.pop_min() : q.pop_max()).id;
            }
        });
    };
    auto run_std = [&] {
        return ns_per_op(ops, [&] {
            for (std::size_t i = 0; i < ops; ++i, ++next_s) {
                s.push(StdKey{stream_key(next_s), next_s});
                sum_s += s.top().id;
                s.pop();
            }
        });
    };
    for (int r = 0; r < rounds; ++r) {
        if (only == Only::kDepq) {
            out.depq_ns.push_back(run_depq());
        } else if (only == Only::kStd) {
            out.std_ns.push_back(run_std());
        } else if (r % 2 == 0) {
            out.depq_ns.push_back(run_depq());
            out.std_ns.push_back(run_std());
        } else {
            out.std_ns.push_back(run_std());
            out.depq_ns.push_back(run_depq());
        }
    }
    // Same keys, same ids, same end: both must have popped exactly the same elements.
    out.checksum = only != Only::kBoth ? sum_q + sum_s : sum_q == sum_s ? sum_q : 0;
    return out;
}

}  // namespace detail

// Interleaved measurement; `low` selects pop_min (baseline: min-heap) or pop_max (max-heap).
// checksum is 0 if the two queues popped different elements (a bug, not a timing).
inline DepqVsStd depq_vs_std(std::size_t n, std::size_t ops, bool low, int rounds, Only only = Only::kBoth,
                             std::uint64_t seed = 12345) {
    return low ? detail::run<detail::KeyAbove>(n, ops, low, rounds, seed, only)
               : detail::run<detail::KeyBelow>(n, ops, low, rounds, seed, only);
}

}  // namespace pard::bench
