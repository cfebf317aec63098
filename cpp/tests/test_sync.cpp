// Standalone test of the simulator's per-sync C++ (numpy_order.hpp, sim_recorder.hpp, sync_planner.hpp)
// against hand-computed values, so that the sanitizer builds run it. Bit-identity with the Python planner
// and recorder is tests/test_planner_native.py's job; here: the arithmetic's meaning and memory safety.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "pard/numpy_order.hpp"
#include "pard/sim_recorder.hpp"
#include "pard/sync_planner.hpp"

#include "check.hpp"

using namespace pard;

namespace {

constexpr std::int64_t kMs = 1'000'000;

bool near(double a, double b) { return std::fabs(a - b) <= 1e-12 * (1.0 + std::fabs(b)); }

// A bit source that replays a fixed list of 32-bit words (then repeats the last), counting draws.
struct Replay {
    std::vector<std::uint32_t> words;
    std::size_t next = 0;
    static std::uint32_t u32(void* self) {
        auto* r = static_cast<Replay*>(self);
        const std::uint32_t w = r->words[r->next < r->words.size() ? r->next : r->words.size() - 1];
        ++r->next;
        return w;
    }
    static double f64(void* self) { return static_cast<double>(u32(self)) / 4294967296.0; }
    npo::BitSource source() { return npo::BitSource{this, &Replay::u32, &Replay::f64}; }
};

void test_numpy_order() {
    for (std::size_t n = 0; n <= 1000; ++n) {  // integers: exact in any order
        std::vector<double> a(n);
        for (std::size_t i = 0; i < n; ++i) a[i] = static_cast<double>(i + 1);
        CHECK(npo::numpy_sum(a) == static_cast<double>(n * (n + 1) / 2));
    }
    const std::vector<double> xp{1, 4}, fp{10, 40};
    CHECK(npo::numpy_interp(2, xp, fp) == 20);
    CHECK(npo::numpy_interp(0, xp, fp) == 10);  // flat below the first point
    CHECK(npo::numpy_interp(5, xp, fp) == 40);  // and past the last
    CHECK(npo::numpy_interp(4, xp, fp) == 40);
    CHECK(npo::numpy_interp(7, {3}, {9}) == 9);  // one point: constant
    Replay r{{0x80000000u, 0xFFFFFFFFu}};
    // n = 10: 0x80000000 * 10 leaves 0 < (2^32 - 10) % 10 = 6: rejected; 0xFFFFFFFF gives 9
    CHECK(npo::lemire_bounded(r.source(), 9) == 9);
    CHECK(r.next == 2);
    CHECK(npo::lemire_bounded(r.source(), 0) == 0);  // n = 1 draws nothing
    CHECK(r.next == 2);
}

void test_recorder() {
    SimRecorder rec(0.0, {{0.0, 0.010, 0.020}});
    std::vector<StageStats> st(1);
    st[0].arrival = {100 * kMs, 200 * kMs, 300 * kMs};
    st[0].batch_size = {1, 2, 2};
    st[0].batch_duration = {5 * kMs, 10 * kMs, 10 * kMs};
    st[0].qdelay_t = {200 * kMs, 500 * kMs, 1000 * kMs};  // bins 0, 0, 1
    st[0].qdelay = {1 * kMs, 2 * kMs, 3 * kMs};
    rec.record(st, {3}, 0.0, 1.0);
    CHECK(rec.submitted()[0] == 3);
    CHECK(rec.executed()[0] == 5);
    CHECK(near(rec.compute_s()[0], 0.025));
    CHECK(near(rec.nominal_s()[0], 1 * 0.010 + 2 * 0.020));
    CHECK(rec.bins() == 2);
    CHECK(near(rec.qsum()[0][0], 0.003) && near(rec.qsum()[0][1], 0.003));
    CHECK(rec.qcnt()[0][0] == 2 && rec.qcnt()[0][1] == 1);
    CHECK(rec.wsum()[0][0] == 3.0 && rec.wdt()[0] == 1.0);  // bin of the interval's midpoint
    std::vector<StageStats> early(1);
    early[0].qdelay_t = {-500 * kMs};  // before the origin: in no bin
    early[0].qdelay = {kMs};
    rec.record(early, {1}, 1.0, 2.0);
    CHECK(rec.qcnt()[0][0] == 2 && rec.qcnt()[0][1] == 1);
    CHECK(rec.wsum()[0][1] == 1.0);
}

// Two stages in a chain, the same interval three times: q_1 = 20 ms, b_1 = 2, d_1(2) = 20 ms,
// rate 100/s against 1 worker * 2 / 20 ms = 100/s (mu = 1), constant rates (eps = 0).
SyncPlannerConfig chain(DownstreamMode mode) {
    SyncPlannerConfig c;
    c.paths = {{{1}}, {}};
    c.parallel = {{}, {}};
    c.below = {{}, {}};
    c.entry = {true, false};
    c.max_batch = {4, 4};
    c.full_d = {0.040, 0.040};
    c.d_table = {{0, 0.010, 0.020, 0.030, 0.040}, {0, 0.010, 0.020, 0.030, 0.040}};
    c.pts_b = {{1, 4}, {1, 4}};
    c.pts_d = {{0.010, 0.040}, {0.010, 0.040}};
    c.drawn = mode == DownstreamMode::kFull ? std::vector<int>{1} : std::vector<int>{};
    c.mode = mode;
    c.adapt_window = false;
    c.samples = 500;
    return c;
}

std::vector<StageStats> interval(std::int64_t t_ns) {
    std::vector<StageStats> st(2);
    for (StageStats& s : st) {
        s.arrival.assign(100, t_ns - 500 * kMs);
        s.qdelay = {10 * kMs, 30 * kMs};
        s.qdelay_t = {t_ns - kMs, t_ns - kMs};
        s.batch_size = {2};
        s.batch_wait = {5 * kMs};
        s.batch_duration = {20 * kMs};
    }
    return st;
}

void test_planner() {
    for (DownstreamMode mode : {DownstreamMode::kUpper, DownstreamMode::kFull, DownstreamMode::kBusy}) {
        Replay bits{{0x12345678u, 0x9ABCDEF0u, 0x0F0F0F0Fu}};
        SyncPlanner p(chain(mode), bits.source());
        std::vector<SyncTerms> terms;
        for (int i = 1; i <= 3; ++i) terms = p.update(static_cast<double>(i), interval(i * 1'000'000'000LL), {1, 1});
        // busy: stage 1 ran 20 ms of batches per 1 s with 1 worker, rho = 0.02, so w = 0.02 * d_1(2)
        const double want = mode == DownstreamMode::kUpper  ? 0.020 + 2 * 0.020
                            : mode == DownstreamMode::kBusy ? 0.020 + 0.020 + 0.02 * 0.020
                                                            : 0.020 + 0.020 + 0.005;
        CHECK(near(terms[0].downstream_s, want));
        CHECK(terms[1].downstream_s == 0.0);  // a sink
        CHECK(near(terms[1].queue_delay_s, 0.020));
        CHECK(near(terms[1].mu, 1.0) && terms[1].eps == 0.0);
        CHECK(near(terms[1].in_rate, 100.0) && near(terms[1].service_rate, 1 * 4 / 0.040));
        bool threw = false;
        try { p.update(3.0, interval(3'000'000'000LL), {1, 1}); } catch (const std::invalid_argument&) { threw = true; }
        CHECK(threw);  // the clock must advance
    }
}

}  // namespace

int main() {
    test_numpy_order();
    test_recorder();
    test_planner();
    std::puts("test_sync: ok");
    return 0;
}
