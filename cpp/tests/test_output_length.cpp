// Standalone tests of pard::llm::OutputLengthPredictor (pard/llm/output_length.hpp): exact quantiles
// on hand-built data, the conditional quantile, the hint cap, decay, the pooled fallback, calibration,
// validation, and no allocation on the hot calls. Plain checks that abort.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "pard/llm/output_length.hpp"

#include "check.hpp"

// Counts every allocation of this program, to show that observe() and quantile() make none.
static std::size_t g_allocations = 0;
void* operator new(std::size_t n) {
    ++g_allocations;
    if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

using pard::llm::OutputLengthConfig;
using pard::llm::OutputLengthPredictor;

namespace {

// Decay negligible over a test's few hundred samples; min_samples 1.
OutputLengthConfig flat(std::int32_t max_out, std::int32_t min_samples = 1, int tiers = 1) {
    OutputLengthConfig c;
    c.max_output_tokens = max_out;
    c.half_life = 1e12;
    c.min_samples = min_samples;
    c.tiers = tiers;
    return c;
}

template <class F>
bool throws(F f) {
    try {
        f();
    } catch (const std::invalid_argument&) {
        return true;
    }
    return false;
}

std::size_t bin_of(const OutputLengthPredictor& p, std::int32_t len) {
    const auto& e = p.bin_edges();
    std::size_t i = 0;
    while (e[i + 1] <= len) ++i;
    return i;
}

void test_bin_edges() {
    OutputLengthPredictor p(flat(1024));
    const auto& e = p.bin_edges();
    const std::vector<std::int32_t> head{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 15, 16, 17, 19, 21, 23, 25};
    for (std::size_t i = 0; i < head.size(); ++i) CHECK(e[i] == head[i]);
    CHECK(e.back() == 1025);
    for (std::size_t i = 1; i < e.size(); ++i) CHECK(e[i] > e[i - 1]);
    CHECK(e.size() == 64);  // eighth octaves: 8 per doubling once a step exceeds a token
    OutputLengthPredictor one(flat(1));
    CHECK(one.bin_edges().size() == 2 && one.bin_edges()[1] == 2);
}

void test_prior_before_min_samples() {
    OutputLengthPredictor p(flat(1024, 5));
    CHECK(p.quantile(100, 0, 0, 0.5) == 1024);
    CHECK(p.quantile(100, 0, 300, 0.5) == 300);
    CHECK(p.quantile(100, 0, 5000, 0.5) == 1024);
    for (int i = 0; i < 4; ++i) p.observe(100, 0, 10);
    CHECK(p.quantile(100, 0, 0, 0.5) == 1024);
    p.observe(100, 0, 10);
    CHECK(p.quantile(100, 0, 0, 0.5) == 10);
}

void test_exact_quantiles_unit_bins() {
    // max 7: every bin is one token wide, so the answers are the exact weighted quantiles.
    OutputLengthPredictor p(flat(7));
    for (std::int32_t len = 1; len <= 7; ++len) p.observe(50, 0, len);
    CHECK(p.quantile(50, 0, 0, 0.5) == 4);   // target 3.5 of 7
    CHECK(p.quantile(50, 0, 0, 0.1) == 1);   // 0.7
    CHECK(p.quantile(50, 0, 0, 0.9) == 7);   // 6.3
    CHECK(p.quantile(50, 0, 0, 0.55) == 4);  // 3.85
    CHECK(p.quantile(50, 0, 0, 0.6) == 5);   // 4.2
    // Lengths above the cap count at the cap.
    OutputLengthPredictor q(flat(7));
    q.observe(50, 0, 1000);
    CHECK(q.quantile(50, 0, 0, 0.01) == 7);
}

void test_interpolation_inside_a_bin() {
    OutputLengthPredictor p(flat(1024));
    for (int i = 0; i < 100; ++i) p.observe(200, 0, 100);
    const auto& e = p.bin_edges();
    const std::size_t b = bin_of(p, 100);
    const std::int32_t lo = e[b], width = e[b + 1] - e[b];
    CHECK(width > 1);
    // Mass 100 spread over `width` tokens: the p-quantile is the ceil(p * width)-th token of the bin.
    for (double q : {0.1, 0.5, 0.9}) {
        const auto k = static_cast<std::int32_t>(std::ceil(q * width - 1e-9));
        CHECK(p.quantile(200, 0, 0, q) == lo + k - 1);
    }
}

void test_conditional_quantile() {
    OutputLengthPredictor p(flat(7));
    for (std::int32_t len = 1; len <= 7; ++len) p.observe(50, 0, len);
    CHECK(p.quantile(50, 0, 0, 0.4, 3) == 5);   // of {4..7}: target 1.6
    CHECK(p.quantile(50, 0, 0, 0.1, 3) == 4);
    CHECK(p.quantile(50, 0, 0, 0.5, 6) == 7);   // only 7 is left
    for (std::int32_t g = 0; g < 7; ++g) CHECK(p.quantile(50, 0, 0, 0.01, g) >= g + 1);
    // Everything seen is shorter than what this one has generated: the cap.
    OutputLengthPredictor q(flat(1024));
    for (int i = 0; i < 10; ++i) q.observe(50, 0, 5);
    CHECK(q.quantile(50, 0, 0, 0.5, 20) == 1024);
    CHECK(q.quantile(50, 0, 100, 0.5, 20) == 100);
    // Only the bins above `generated` are read: a wide bin counts its share above it.
    OutputLengthPredictor w(flat(1024));
    for (int i = 0; i < 100; ++i) w.observe(50, 0, 100);
    for (int i = 0; i < 100; ++i) w.observe(50, 0, 600);
    const std::int32_t median0 = w.quantile(50, 0, 0, 0.4);
    CHECK(median0 < 200);
    CHECK(w.quantile(50, 0, 0, 0.5, 150) >= 500);  // past the short ones: only the long ones are left
    const std::size_t b = bin_of(w, 100);
    const std::int32_t mid = (w.bin_edges()[b] + w.bin_edges()[b + 1]) / 2;
    const std::int32_t inside = w.quantile(50, 0, 0, 0.5, mid);
    CHECK(inside >= 500);  // the short bin's remainder is under half the mass above mid
}

void test_hint_caps() {
    OutputLengthPredictor p(flat(7));
    for (std::int32_t len = 1; len <= 7; ++len) p.observe(50, 0, len);
    CHECK(p.quantile(50, 0, 3, 0.9) == 3);
    CHECK(p.quantile(50, 0, 3, 0.1) == 1);
    CHECK(p.quantile(50, 0, 100, 0.9) == 7);
    CHECK(p.quantile(50, 0, 3, 0.9, 2) == 3);
    CHECK(throws([&] { (void)p.quantile(50, 0, 3, 0.5, 3); }));  // generated reached the hint
    CHECK(throws([&] { (void)p.quantile(50, 0, 0, 0.5, 7); }));  // ... or max_output_tokens
}

void test_decay_follows_a_shift() {
    OutputLengthConfig c;
    c.max_output_tokens = 1024;
    c.half_life = 100;
    c.min_samples = 8;
    OutputLengthPredictor p(c);
    for (int i = 0; i < 1000; ++i) p.observe(100, 0, 20);
    CHECK(bin_of(p, p.quantile(100, 0, 0, 0.5)) == bin_of(p, 20));
    for (int i = 0; i < 20; ++i) p.observe(100, 0, 400);  // a fifth of a half-life: the old still rule
    CHECK(bin_of(p, p.quantile(100, 0, 0, 0.5)) == bin_of(p, 20));
    for (int i = 0; i < 180; ++i) p.observe(100, 0, 400);  // two half-lives: the old weigh a quarter
    CHECK(bin_of(p, p.quantile(100, 0, 0, 0.5)) == bin_of(p, 400));
    CHECK(bin_of(p, p.quantile(100, 0, 0, 0.2)) == bin_of(p, 20));  // ~26 % of the mass is still old
    // The steady mass of a stream is 1 / (1 - 2^(-1/half_life)), about 144.8 here.
    const double steady = 1.0 / (1.0 - std::exp2(-1.0 / 100.0));
    CHECK(std::fabs(p.cell_mass(100, 0) - steady) < 0.5);
}

void test_renormalisation_keeps_answers() {
    OutputLengthConfig c;
    c.max_output_tokens = 64;
    c.half_life = 1.0;  // the increment doubles per sample: renormalised every ~500 samples
    c.min_samples = 1;
    OutputLengthPredictor p(c);
    for (int i = 0; i < 5000; ++i) p.observe(10, 0, i % 2 == 0 ? 3 : 40);
    CHECK(std::fabs(p.cell_mass(10, 0) - 2.0) < 1e-9);  // 1 + 1/2 + 1/4 + ...
    // The newest (40) weighs 1, the one before (3) 1/2, ...: 2/3 of the mass is at 40.
    CHECK(p.quantile(10, 0, 0, 0.2) == 3);
    CHECK(bin_of(p, p.quantile(10, 0, 0, 0.5)) == bin_of(p, 40));
    CHECK(p.observed() == 5000);
}

void test_pooled_fallback() {
    OutputLengthPredictor p(flat(1024, 10, 2));
    for (int i = 0; i < 100; ++i) p.observe(100, 0, 50);
    for (int i = 0; i < 5; ++i) p.observe(100, 1, 500);
    // Tier 1's cell holds 5 < 10: the input bucket's pool (both tiers) answers.
    CHECK(bin_of(p, p.quantile(100, 1, 0, 0.5)) == bin_of(p, 50));
    for (int i = 0; i < 20; ++i) p.observe(100, 1, 500);
    CHECK(bin_of(p, p.quantile(100, 1, 0, 0.5)) == bin_of(p, 500));
    CHECK(bin_of(p, p.quantile(100, 0, 0, 0.5)) == bin_of(p, 50));
    // An input bucket nobody has seen: the global pool (125 samples, 100 of them at 50).
    CHECK(bin_of(p, p.quantile(5000, 0, 0, 0.5)) == bin_of(p, 50));
    CHECK(bin_of(p, p.quantile(5000, 0, 0, 0.9)) == bin_of(p, 500));
    // Inputs in one log2 bucket share a cell; the next bucket does not.
    CHECK(p.cell_mass(64, 0) > 99.0 && p.cell_mass(127, 0) > 99.0 && p.cell_mass(128, 0) == 0.0);
    // The conditional counts only the mass above `generated`: tier 0 has none above 60, tier 1's
    // 25 and the pool answer.
    CHECK(bin_of(p, p.quantile(100, 0, 0, 0.5, 60)) == bin_of(p, 500));
}

void test_tier_folding_and_buckets() {
    OutputLengthPredictor p(flat(1024, 1, 100));
    p.observe(10, 15, 7);
    p.observe(10, 99, 7);
    CHECK(p.cell_mass(10, 15) > 1.9 && p.cell_mass(10, 40) > 1.9);
    CHECK(p.cell_mass(10, 14) == 0.0);
    CHECK(OutputLengthPredictor::input_bucket(0) == 0);
    CHECK(OutputLengthPredictor::input_bucket(1) == 1);
    CHECK(OutputLengthPredictor::input_bucket(3) == 2);
    CHECK(OutputLengthPredictor::input_bucket(4) == 3);
    CHECK(OutputLengthPredictor::input_bucket(16383) == 14);
    CHECK(OutputLengthPredictor::input_bucket(16384) == 15);
    CHECK(OutputLengthPredictor::input_bucket(2'000'000'000) == 15);
}

void test_calibration() {
    OutputLengthPredictor p(flat(1024));
    CHECK(p.calibration().n == 0 && p.calibration().under == 0);
    p.record_calibration(100, 50);
    p.record_calibration(100, 100);  // equal counts as under
    p.record_calibration(100, 101);
    CHECK(p.calibration().n == 3 && p.calibration().under == 2);
    CHECK(throws([&] { p.record_calibration(0, 5); }));
    CHECK(throws([&] { p.record_calibration(5, -1); }));
    CHECK(p.calibration().n == 3);
}

void test_validation() {
    auto cfg = [](std::int32_t m, double h, std::int32_t s, int t) {
        OutputLengthConfig c;
        c.max_output_tokens = m;
        c.half_life = h;
        c.min_samples = s;
        c.tiers = t;
        return c;
    };
    CHECK(throws([&] { OutputLengthPredictor p(cfg(0, 2000, 32, 1)); }));
    CHECK(throws([&] { OutputLengthPredictor p(cfg(1024, 0.5, 1, 1)); }));
    CHECK(throws([&] { OutputLengthPredictor p(cfg(1024, std::numeric_limits<double>::infinity(), 1, 1)); }));
    CHECK(throws([&] { OutputLengthPredictor p(cfg(1024, std::numeric_limits<double>::quiet_NaN(), 1, 1)); }));
    CHECK(throws([&] { OutputLengthPredictor p(cfg(1024, 2000, 0, 1)); }));
    CHECK(!throws([&] { OutputLengthPredictor p(cfg(1024, 10, 100, 1)); }));  // reached as the steady mass is
    CHECK(throws([&] { OutputLengthPredictor p(cfg(1024, 2000, 32, 0)); }));
    try {
        OutputLengthPredictor p(cfg(-3, 2000, 32, 1));
        CHECK(false);
    } catch (const std::invalid_argument& e) {
        CHECK(std::string(e.what()).find("max_output_tokens") != std::string::npos);
        CHECK(std::string(e.what()).find("-3") != std::string::npos);
    }
    OutputLengthPredictor p(flat(1024));
    CHECK(throws([&] { p.observe(-1, 0, 5); }));
    CHECK(throws([&] { p.observe(1, -1, 5); }));
    CHECK(throws([&] { p.observe(1, 0, 0); }));
    CHECK(throws([&] { (void)p.quantile(1, 0, 0, 0.0); }));
    CHECK(throws([&] { (void)p.quantile(1, 0, 0, 1.0); }));
    CHECK(throws([&] { (void)p.quantile(1, 0, 0, std::numeric_limits<double>::quiet_NaN()); }));
    CHECK(throws([&] { (void)p.quantile(1, 0, -2, 0.5); }));
    CHECK(throws([&] { (void)p.quantile(1, 0, 0, 0.5, -1); }));
    CHECK(throws([&] { (void)p.quantile(-1, 0, 0, 0.5); }));
    CHECK(p.observed() == 0);
}

void test_no_allocation_on_hot_calls() {
    OutputLengthPredictor p(flat(4096, 4, 4));
    const std::size_t before = g_allocations;
    std::int64_t sum = 0;
    for (int i = 0; i < 10000; ++i) {
        p.observe(i % 3000, i % 5, 1 + (i * 37) % 4000);
        sum += p.quantile(i % 2000, i % 4, i % 3 == 0 ? 500 : 0, 0.7, i % 100);
    }
    CHECK(g_allocations == before);
    CHECK(sum > 0);
}

}  // namespace

int main() {
    test_bin_edges();
    test_prior_before_min_samples();
    test_exact_quantiles_unit_bins();
    test_interpolation_inside_a_bin();
    test_conditional_quantile();
    test_hint_caps();
    test_decay_follows_a_shift();
    test_renormalisation_keeps_answers();
    test_pooled_fallback();
    test_tier_folding_and_buckets();
    test_calibration();
    test_validation();
    test_no_allocation_on_hot_calls();
    std::puts("test_output_length: ok");
    return 0;
}
