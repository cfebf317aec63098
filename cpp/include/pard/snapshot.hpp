// pard/snapshot.hpp — the terms a planner publishes to a stage's workers (DESIGN §3.2, §3.5).
//
// Terms: the downstream estimate Σq + Σd + w (ns), the load factor mu and its band eps (§3.3), the
// stage's recent average queueing delay (DAGOR's overload signal), the admission fraction (rate-
// aware shedding at the entry, §3.7), the stage's service rate (requests/s it can finish with its
// serving workers at full batches: pard's hot-path overload test) and the measured/profiled duration
// ratio that scales d_k(b) (§3.7, online correction of the profile), and the least service rate
// among the stages below (pard's pacing, stage_scheduler.hpp step 2c), and the downstream estimate a
// stage's pop rule uses when its hot-path overload test holds (stage_scheduler.hpp step 2b). The planner writes them once per sync interval; every worker
// reads them once per batch. They must be read as one consistent snapshot (never half old, half
// new) without taking a lock on the workers' path.
//
// Algorithm: a sequence lock whose payload fields are themselves std::atomic, so that the racing
// reads are not data races in the C++ memory model (and are clean under TSan):
//   writer: seq <- s+1 (odd: "write in progress"); store every field with release; seq <- s+2 (release).
//   reader: s1 <- seq (acquire); retry while odd; load every field with acquire; s2 <- seq (relaxed);
//           retry unless s1 == s2.
// Why the orderings suffice: a reader that loads any field value written by an in-progress write
// synchronises with that release store, so it also sees seq = s+1 (stored before it in program
// order) and its check s2 != s1 fails; the acquire loads keep the second seq load after the field
// loads. A reader that sees seq = s+2 (acquire) sees every field of that write. On x86 every one of
// these operations is a plain load or store. Writers are serialised by a mutex (publishing is rare);
// readers never block a writer and retry only while a write overlaps them (lock-free for readers
// in practice, not wait-free).
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>

namespace pard {

// The clip of every measured / profiled duration ratio (pard.duration_scale.SCALE_MIN, SCALE_MAX: one
// value, exported to Python as _core.DURATION_SCALE_BOUNDS and asserted equal in the tests).
inline constexpr double kDurationScaleMin = 0.001;
inline constexpr double kDurationScaleMax = 1000.0;

struct PublishedTerms {
    std::int64_t downstream_ns = 0;   // Σ_{downstream} q_i + Σ d_i(b_i) + w_k; 0 before the first publish
    double mu = 0.0;                  // load factor of this stage (T_in / T_m)
    double eps = 0.0;                 // burstiness band (§3.3)
    std::int64_t queue_delay_ns = 0;  // recent average queueing delay at this stage (DAGOR)
    double admit_fraction = 1.0;      // share of arriving requests to admit (1 = all)
    double service_rate = 0.0;        // requests/s the stage finishes at full batches (0 = unknown)
    double duration_scale = 1.0;      // measured / profiled batch duration: d_k(b) is scaled by it;
                                      // 0 = none measured yet (the stage uses its own: effective_terms)
    double path_rate = 0.0;           // requests/s the slowest stage below this one finishes (0 = none)
    std::int64_t overload_downstream_ns = 0;  // the pop rule's downstream floor when overloaded (0 = none)
    std::int64_t floor_downstream_ns = 0;     // Σq + Σd below, the published term's fallback (0 = none)
    std::int64_t outrank_downstream_ns = 0;   // Σ min(q, d/2) + Σd below: a tier served first's (0 = none)

    // The one validation of published terms (seconds in, ns stored); throws std::invalid_argument
    // naming the field and the value. Every binding that publishes goes through it.
    static PublishedTerms from_seconds(double downstream_s, double mu, double eps, double queue_delay_s,
                                       double admit_fraction = 1.0, double service_rate = 0.0,
                                       double duration_scale = 1.0, double path_rate = 0.0,
                                       double overload_downstream_s = 0.0, double floor_downstream_s = 0.0,
                                       double outrank_downstream_s = 0.0) {
        PublishedTerms t;
        t.downstream_ns = seconds_field(downstream_s, "downstream_s");
        t.mu = finite_nonneg(mu, "mu");
        t.eps = finite_nonneg(eps, "eps");
        t.queue_delay_ns = seconds_field(queue_delay_s, "queue_delay_s");
        if (!(admit_fraction >= 0.0 && admit_fraction <= 1.0)) {
            throw std::invalid_argument("admit_fraction=" + std::to_string(admit_fraction) + " must be in [0, 1]");
        }
        t.admit_fraction = admit_fraction;
        t.service_rate = finite_nonneg(service_rate, "service_rate");
        if (!(std::isfinite(duration_scale) && duration_scale >= 0.0 && duration_scale <= 1e3)) {
            throw std::invalid_argument("duration_scale=" + std::to_string(duration_scale) +
                                        " must be in [0, 1000] (0: none measured yet)");
        }
        t.duration_scale = duration_scale;
        t.path_rate = finite_nonneg(path_rate, "path_rate");
        t.overload_downstream_ns = seconds_field(overload_downstream_s, "overload_downstream_s");
        t.floor_downstream_ns = seconds_field(floor_downstream_s, "floor_downstream_s");
        t.outrank_downstream_ns = seconds_field(outrank_downstream_s, "outrank_downstream_s");
        return t;
    }

private:
    static std::int64_t seconds_field(double s, const char* field) {
        if (!std::isfinite(s) || s < 0.0 || s > 9.0e9) {
            throw std::invalid_argument(std::string(field) + "=" + std::to_string(s) +
                                        " must be a finite number of seconds >= 0");
        }
        return static_cast<std::int64_t>(std::llround(s * 1e9));
    }
    static double finite_nonneg(double v, const char* field) {
        if (!std::isfinite(v) || v < 0.0) {
            throw std::invalid_argument(std::string(field) + "=" + std::to_string(v) + " must be finite and >= 0");
        }
        return v;
    }
};

class SnapshotCell {
public:
    SnapshotCell() = default;
    SnapshotCell(const SnapshotCell&) = delete;
    SnapshotCell& operator=(const SnapshotCell&) = delete;

    // Single logical writer at a time (serialised by a mutex); never blocks readers.
    void store(const PublishedTerms& t) {
        std::lock_guard<std::mutex> guard(writer_);
        const std::uint64_t s = seq_.load(std::memory_order_relaxed);
        seq_.store(s + 1, std::memory_order_relaxed);
        downstream_ns_.store(t.downstream_ns, std::memory_order_release);
        mu_.store(t.mu, std::memory_order_release);
        eps_.store(t.eps, std::memory_order_release);
        queue_delay_ns_.store(t.queue_delay_ns, std::memory_order_release);
        admit_fraction_.store(t.admit_fraction, std::memory_order_release);
        service_rate_.store(t.service_rate, std::memory_order_release);
        duration_scale_.store(t.duration_scale, std::memory_order_release);
        path_rate_.store(t.path_rate, std::memory_order_release);
        overload_downstream_ns_.store(t.overload_downstream_ns, std::memory_order_release);
        floor_downstream_ns_.store(t.floor_downstream_ns, std::memory_order_release);
        outrank_downstream_ns_.store(t.outrank_downstream_ns, std::memory_order_release);
        seq_.store(s + 2, std::memory_order_release);
    }

    // A consistent copy of the last completed store (the defaults before any store).
    [[nodiscard]] PublishedTerms load() const noexcept {
        PublishedTerms t;
        for (;;) {
            const std::uint64_t s1 = seq_.load(std::memory_order_acquire);
            if ((s1 & 1U) != 0) continue;  // a write is in progress
            t.downstream_ns = downstream_ns_.load(std::memory_order_acquire);
            t.mu = mu_.load(std::memory_order_acquire);
            t.eps = eps_.load(std::memory_order_acquire);
            t.queue_delay_ns = queue_delay_ns_.load(std::memory_order_acquire);
            t.admit_fraction = admit_fraction_.load(std::memory_order_acquire);
            t.service_rate = service_rate_.load(std::memory_order_acquire);
            t.duration_scale = duration_scale_.load(std::memory_order_acquire);
            t.path_rate = path_rate_.load(std::memory_order_acquire);
            t.overload_downstream_ns = overload_downstream_ns_.load(std::memory_order_acquire);
            t.floor_downstream_ns = floor_downstream_ns_.load(std::memory_order_acquire);
            t.outrank_downstream_ns = outrank_downstream_ns_.load(std::memory_order_acquire);
            const std::uint64_t s2 = seq_.load(std::memory_order_relaxed);
            if (s1 == s2) return t;
        }
    }

    // How many stores have completed (for tests).
    [[nodiscard]] std::uint64_t version() const noexcept { return seq_.load(std::memory_order_acquire) / 2; }

private:
    std::atomic<std::uint64_t> seq_{0};
    std::atomic<std::int64_t> downstream_ns_{0};
    std::atomic<double> mu_{0.0};
    std::atomic<double> eps_{0.0};
    std::atomic<std::int64_t> queue_delay_ns_{0};
    std::atomic<double> admit_fraction_{1.0};
    std::atomic<double> service_rate_{0.0};
    std::atomic<double> duration_scale_{1.0};
    std::atomic<double> path_rate_{0.0};
    std::atomic<std::int64_t> overload_downstream_ns_{0};
    std::atomic<std::int64_t> floor_downstream_ns_{0};
    std::atomic<std::int64_t> outrank_downstream_ns_{0};
    std::mutex writer_;
};

static_assert(std::atomic<double>::is_always_lock_free,
              "the snapshot's readers must not take a lock: atomic<double> has to be lock-free");
static_assert(std::atomic<std::int64_t>::is_always_lock_free,
              "the snapshot's readers must not take a lock: atomic<int64_t> has to be lock-free");

}  // namespace pard
