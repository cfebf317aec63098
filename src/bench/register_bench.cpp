// C++-side timings for bench/ (pard._core_bench, a test-only module): the cost of the core
// structures without the binding in the way (DEPQ, ring, the Eq. 3b drop decision, a StageScheduler submit + form_batch cycle).
// Each call releases the GIL and returns nanoseconds per operation pair.
#include <pybind11/pybind11.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "depq_vs_std.hpp"
#include "pard/depq.hpp"
#include "pard/mpmc_ring.hpp"
#include "pard/estimator.hpp"
#include "pard/policy.hpp"
#include "pard/profile.hpp"
#include "pard/request.hpp"
#include "pard/stage_scheduler.hpp"
#include "register_bench.hpp"

namespace py = pybind11;

namespace pard::bind {
namespace {

// Keeps results observable so the optimiser cannot drop the timed loops.
volatile std::uint64_t g_sink = 0;

// A RequestDepq of n random deadlines; then `ops` times: push a request with a random deadline and
// pop one from `end` ("min" or "max"). Keys come from a pre-drawn table, outside the timing.
double bench_depq(std::int64_t n, std::int64_t ops, const std::string& end) {
    if (n < 0 || n > (std::int64_t{1} << 30)) throw py::value_error("bench_depq: 'n' must be in [0, 2^30], got " + std::to_string(n));
    if (ops < 1) throw py::value_error("bench_depq: 'ops' must be >= 1, got " + std::to_string(ops));
    if (end != "min" && end != "max") throw py::value_error("bench_depq: 'end' must be 'min' or 'max', got '" + end + "'");
    const bool low = end == "min";
    py::gil_scoped_release release;
    std::mt19937_64 rng(12345);
    std::uniform_int_distribution<std::int64_t> deadline(0, 1'000'000'000);
    constexpr std::size_t kTable = 1U << 16;
    std::vector<std::int64_t> keys(kTable);
    for (auto& k : keys) k = deadline(rng);
    RequestDepq q;
    q.reserve(static_cast<std::size_t>(n) + 1);
    std::uint64_t id = 0;
    for (std::int64_t i = 0; i < n; ++i, ++id) q.push(Request{id, 0, deadline(rng), 0, 0, 0});
    std::uint64_t sum = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (std::int64_t i = 0; i < ops; ++i, ++id) {
        q.push(Request{id, 0, keys[id & (kTable - 1)], 0, 0, 0});
        sum += (low ? q.pop_min() : q.pop_max()).id;
    }
    const auto t1 = std::chrono::steady_clock::now();
    g_sink = g_sink + sum;
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(ops);
}

// Interleaved rounds of RequestDepq and std::priority_queue of the same 16-byte key:
// {"depq_ns": [...], "std_ns": [...]}, ns per push + pop_<end> pair per round, thread CPU time.
py::dict bench_depq_vs_std(std::int64_t n, std::int64_t ops, const std::string& end, int rounds) {
    if (n < 0 || n > (std::int64_t{1} << 30)) throw py::value_error("bench_depq_vs_std: 'n' must be in [0, 2^30], got " + std::to_string(n));
    if (ops < 1) throw py::value_error("bench_depq_vs_std: 'ops' must be >= 1, got " + std::to_string(ops));
    if (rounds < 1) throw py::value_error("bench_depq_vs_std: 'rounds' must be >= 1, got " + std::to_string(rounds));
    if (end != "min" && end != "max") throw py::value_error("bench_depq_vs_std: 'end' must be 'min' or 'max', got '" + end + "'");
    bench::DepqVsStd r;
    {
        py::gil_scoped_release release;
        r = bench::depq_vs_std(static_cast<std::size_t>(n), static_cast<std::size_t>(ops), end == "min", rounds);
    }
    if (r.checksum == 0) throw std::runtime_error("bench_depq_vs_std: the DEPQ and std::priority_queue popped different elements");
    auto as_list = [](const std::vector<double>& v) {
        py::list l;
        for (double x : v) l.append(x);
        return l;
    };
    py::dict out;
    out["depq_ns"] = as_list(r.depq_ns);
    out["std_ns"] = as_list(r.std_ns);
    return out;
}

// One thread alternating try_push and try_pop on an MpmcRing<uint64_t> of `capacity` slots.
double bench_ring(std::int64_t ops, std::int64_t capacity) {
    if (ops < 1) throw py::value_error("bench_ring: 'ops' must be >= 1, got " + std::to_string(ops));
    if (capacity < 2 || (capacity & (capacity - 1)) != 0 || capacity > (std::int64_t{1} << 30)) {
        throw py::value_error("bench_ring: 'capacity' must be a power of two in [2, 2^30], got " + std::to_string(capacity));
    }
    py::gil_scoped_release release;
    MpmcRing<std::uint64_t> ring(static_cast<std::size_t>(capacity));
    std::uint64_t sum = 0;
    std::uint64_t out = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (std::int64_t i = 0; i < ops; ++i) {
        ring.try_push(static_cast<std::uint64_t>(i));
        ring.try_pop(out);
        sum += out;
    }
    const auto t1 = std::chrono::steady_clock::now();
    g_sink = g_sink + sum;
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(ops);
}

// Times the Eq. 3b decision over n requests whose deadlines straddle the threshold (half drop):
// one compare per request, as in the pop loop. Returns ns per decision.
double bench_drop_decision(std::int64_t n) {
    if (n < 1) throw std::invalid_argument("n=" + std::to_string(n) + " must be >= 1");
    std::vector<Request> reqs(static_cast<std::size_t>(n));
    std::uint64_t x = 88172645463325252ULL;  // xorshift: deterministic deadlines
    for (std::size_t i = 0; i < reqs.size(); ++i) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        reqs[i] = Request{i, 0, static_cast<std::int64_t>(x % 2'000'000), 0, 0, 0};
    }
    const std::int64_t threshold = pard_threshold(400'000, 300'000, 300'000);
    const auto t0 = std::chrono::steady_clock::now();
    std::uint64_t drops = 0;
    for (const Request& r : reqs) drops += pard_drops(r, threshold) ? 1U : 0U;
    const auto t1 = std::chrono::steady_clock::now();
    volatile std::uint64_t sink = drops;
    (void)sink;
    return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()) /
           static_cast<double>(n);
}

// Times a full StageScheduler cycle: submit `queue` requests, then form batches of max_batch until
// the queue is empty, under `policy` (nothing dropped: deadlines are far away). Returns ns per
// request (submit + drain + pop + decision).
double bench_form_batch(std::int64_t queue, std::int64_t max_batch, const Policy& policy, std::int64_t rounds) {
    if (queue < 1 || max_batch < 1 || rounds < 1) throw std::invalid_argument("queue, max_batch and rounds must be >= 1");
    StageConfig cfg;
    cfg.profile = Profile({1}, {1000});
    cfg.max_batch = max_batch;
    cfg.policy = policy;
    std::size_t cap = 2;
    while (cap < static_cast<std::size_t>(queue)) cap *= 2;
    cfg.ring_capacity = cap;
    StageScheduler s(cfg);
    PublishedTerms terms;
    terms.service_rate = 1e12;  // a reactive policy runs its overload test on every batch (never firing)
    s.publish(terms);
    BatchResult out;
    out.batch.reserve(static_cast<std::size_t>(max_batch));
    std::uint64_t x = 88172645463325252ULL;
    std::uint64_t id = 0;
    std::uint64_t kept = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (std::int64_t round = 0; round < rounds; ++round) {
        for (std::int64_t i = 0; i < queue; ++i) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            const auto dl = static_cast<std::int64_t>(x % 1'000'000'000) + 10'000'000'000;
            s.submit(Request{id++, 0, dl, i, 0, 0});
        }
        while (s.queued() > 0) {
            s.form_batch(0, 0, out);
            kept += out.batch.size();
        }
    }
    const auto t1 = std::chrono::steady_clock::now();
    volatile std::uint64_t sink = kept;
    (void)sink;
    return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()) /
           static_cast<double>(queue * rounds);
}

}  // namespace

void register_bench(py::module_& m) {
    m.def("bench_depq", &bench_depq, py::arg("n"), py::arg("ops"), py::arg("end"),
          "Nanoseconds per (push + pop_<end>) pair on a C++ RequestDepq holding n requests (GIL released).");
    m.def("bench_depq_vs_std", &bench_depq_vs_std, py::arg("n"), py::arg("ops"), py::arg("end"), py::arg("rounds"),
          "Interleaved rounds: ns per (push + pop_<end>) pair of RequestDepq and of std::priority_queue of the "
          "same (deadline_ns, id) key, both holding n (GIL released). Returns {'depq_ns': [...], 'std_ns': [...]}.");
    m.def("bench_ring", &bench_ring, py::arg("ops"), py::arg("capacity"),
          "Nanoseconds per (try_push + try_pop) pair on a C++ MpmcRing<uint64>, one thread (GIL released).");
    m.def("bench_drop_decision", &bench_drop_decision, py::arg("n"),
          "ns per Eq. 3b drop decision over n requests, timed in C++.");
    m.def("bench_form_batch", &bench_form_batch, py::arg("queue"), py::arg("max_batch"), py::arg("policy"),
          py::arg("rounds") = 1, "ns per request of submit + form_batch cycles, timed in C++.");
}

}  // namespace pard::bind
