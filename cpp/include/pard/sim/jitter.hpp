// pard/sim/jitter.hpp — LognormalJitter: the simulator's execution-time factor, lognormal with
// mean 1 and coefficient of variation cv (sigma^2 = ln(1 + cv^2), mu = -sigma^2 / 2). One
// std::mt19937_64 seeded by `seed` and our own Box-Muller transform (the standard distributions
// are not specified bit-for-bit across libraries): same seed, same draws, on every platform.
// cv = 0 draws nothing and returns 1.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>

namespace pard::sim {

class LognormalJitter {
public:
    LognormalJitter(std::uint64_t seed, double cv) : rng_(seed) {
        if (cv > 0.0) {
            sigma_ = std::sqrt(std::log1p(cv * cv));
            mu_ = -0.5 * sigma_ * sigma_;
        }
    }

    double operator()() {
        if (sigma_ == 0.0) return 1.0;
        double z;
        if (have_spare_) {
            z = spare_;
            have_spare_ = false;
        } else {
            double u1;
            do {
                u1 = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
            } while (u1 <= 0.0);
            const double u2 = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
            const double r = std::sqrt(-2.0 * std::log(u1));
            const double th = 6.283185307179586476925 * u2;
            z = r * std::cos(th);
            spare_ = r * std::sin(th);
            have_spare_ = true;
        }
        return std::exp(mu_ + sigma_ * z);
    }

private:
    std::mt19937_64 rng_;
    double sigma_ = 0.0;
    double mu_ = 0.0;
    bool have_spare_ = false;
    double spare_ = 0.0;
};

}  // namespace pard::sim
