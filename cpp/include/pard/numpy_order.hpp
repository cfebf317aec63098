// pard/numpy_order.hpp — float arithmetic in NumPy's exact order, so that C++ code that replaces a
// NumPy expression gives the same bits (the simulator's per-sync planner and recorder, sync_core.hpp).
//
//   * numpy_sum: ndarray.sum() / np.add.reduce of float64 over a contiguous run: 0.0 plus NumPy's
//     pairwise sum (numpy/_core/src/umath/loops_utils.h.src: below 8 elements in sequence; up to 128
//     with eight interleaved accumulators combined as ((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7)), the rest in
//     sequence; above 128 split at n/2 rounded down to a multiple of 8).
//   * numpy_interp: np.interp for one scalar x (numpy/_core/src/multiarray/compiled_base.c).
//   * lemire_bounded: Generator.integers(0, n, dtype=np.int32) for one draw (numpy/random/src/
//     distributions/distributions.c, buffered_bounded_lemire_uint32): the same bits of the same
//     bit generator give the same integers.
// Contraction into FMA would change results: the build does not pass -ffast-math or -mfma.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace pard::npo {

inline double pairwise(const double* a, std::size_t n) noexcept {
    if (n < 8) {
        double res = 0.0;
        for (std::size_t i = 0; i < n; ++i) res += a[i];
        return res;
    }
    if (n <= 128) {
        double r[8];
        for (int j = 0; j < 8; ++j) r[j] = a[j];
        std::size_t i = 8;
        for (; i < n - (n % 8); i += 8) {
            for (int j = 0; j < 8; ++j) r[j] += a[i + static_cast<std::size_t>(j)];
        }
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; ++i) res += a[i];
        return res;
    }
    std::size_t n2 = n / 2;
    n2 -= n2 % 8;
    return pairwise(a, n2) + pairwise(a + n2, n - n2);
}

// ndarray.sum() of a float64 array: the reduction starts from the identity 0.0.
inline double numpy_sum(const double* a, std::size_t n) noexcept { return 0.0 + pairwise(a, n); }
inline double numpy_sum(const std::vector<double>& a) noexcept { return numpy_sum(a.data(), a.size()); }

// np.interp(x, xp, fp) for a scalar x, xp sorted and distinct, default left/right (fp's ends).
inline double numpy_interp(double x, const std::vector<double>& xp, const std::vector<double>& fp) noexcept {
    const std::size_t n = xp.size();
    if (n == 1) return fp[0];
    if (std::isnan(x)) return x;
    if (x < xp[0]) return fp[0];
    if (x > xp[n - 1]) return fp[n - 1];
    std::size_t j = 0;  // the largest j with xp[j] <= x
    while (j + 1 < n && xp[j + 1] <= x) ++j;
    if (j == n - 1 || xp[j] == x) return fp[j];
    const double slope = (fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j]);
    double r = slope * (x - xp[j]) + fp[j];
    if (std::isnan(r)) {
        r = slope * (x - xp[j + 1]) + fp[j + 1];
        if (std::isnan(r) && fp[j] == fp[j + 1]) r = fp[j];
    }
    return r;
}

// A bit generator as NumPy's bitgen_t exposes it (the capsule of Generator.bit_generator): the
// functions draw from the generator's own state, so Python and C++ share one stream.
struct BitSource {
    void* state = nullptr;
    std::uint32_t (*next_uint32)(void*) = nullptr;
    double (*next_double)(void*) = nullptr;
};

// One Generator.integers(0, rng + 1, dtype=np.int32) value (rng = n - 1; rng 0 draws nothing).
inline std::uint32_t lemire_bounded(const BitSource& src, std::uint32_t rng) noexcept {
    if (rng == 0) return 0;
    if (rng == 0xFFFFFFFFu) return src.next_uint32(src.state);
    const std::uint32_t rng_excl = rng + 1;
    std::uint64_t m = static_cast<std::uint64_t>(src.next_uint32(src.state)) * rng_excl;
    std::uint32_t leftover = static_cast<std::uint32_t>(m & 0xFFFFFFFFu);
    if (leftover < rng_excl) {
        const std::uint32_t threshold = (0xFFFFFFFFu - rng) % rng_excl;
        while (leftover < threshold) {
            m = static_cast<std::uint64_t>(src.next_uint32(src.state)) * rng_excl;
            leftover = static_cast<std::uint32_t>(m & 0xFFFFFFFFu);
        }
    }
    return static_cast<std::uint32_t>(m >> 32);
}

}  // namespace pard::npo
