// pard/door.hpp — the door test: when could a request arriving now at an entry stage leave the
// pipeline? (DESIGN §3.2 applied at arrival.)
//
// A server decides at its door, before it reads or decodes a request's body, whether the pipeline
// can finish the request by its deadline. Reading and decoding cost the front more than the refusal,
// and under overload most of what arrives would be dropped at the entry anyway, after the front has
// spent on it. The estimate is the entry stage's own drop rule (paper Eq. 3b) taken at arrival, with
// the queue ahead of the request as its wait:
//
//   finish = now + n / R + d_k(min(n + 1, B)) + downstream
//
//   n           the requests that pop before it in the stage's order now (queued_ahead: a lighter tier
//               waits behind the heavier ones the stage serves first);
//   R           the stage's published service rate (requests/s at full batches with its serving
//               workers), or its profiled capacity before the planner has published one;
//   d_k(b)      the stage's expected batch duration (profile times the measured duration ratio);
//   downstream  the stage's published downstream term (Σq + Σd + w along its worst path).
//
// The wait n / R is the fluid time to work off what is ahead; it neither credits the batch already
// running nor charges a partly filled batch, so it errs by about one batch either way, and the entry's
// own rule stays in force behind the door. Reads only relaxed sizes and the published snapshot: no
// lock, safe from any thread.
#pragma once

#include <algorithm>
#include <cstdint>

#include "pard/stage_scheduler.hpp"

namespace pard {

// A finish past this (ns: about 127 years) is reported as this: never feasible, never an overflow.
inline constexpr double kFinishCapNs = 4.0e18;

// The estimated time (ns, the runtime clock) at which a request of tier weight `tier_weight` arriving
// at `now_ns` at this entry stage would leave the pipeline. `capacity_req_s` (> 0) is the stage's
// profiled drain rate, used until the planner publishes a service rate.
[[nodiscard]] inline std::int64_t door_finish_ns(const StageScheduler& s, double capacity_req_s, double tier_weight,
                                                 std::int64_t now_ns) noexcept {
    const PublishedTerms t = s.effective_terms();
    const std::size_t n = s.queued_ahead(tier_weight);
    double rate = t.service_rate;
    if (!(rate > 0.0)) {
        const double scale = t.duration_scale > 0.0 ? t.duration_scale : 1.0;
        rate = capacity_req_s / scale;
    }
    const double wait_s = rate > 0.0 ? static_cast<double>(n) / rate : 0.0;
    const std::int64_t b = std::min<std::int64_t>(static_cast<std::int64_t>(n) + 1, s.config().max_batch);
    // in double, capped far below int64's range: a huge queue or term must not wrap around to "soon"
    const double finish = static_cast<double>(now_ns) + wait_s * 1e9 +
                          static_cast<double>(s.expected_duration_ns(b)) + static_cast<double>(t.downstream_ns);
    return static_cast<std::int64_t>(std::min(finish, kFinishCapNs));
}

}  // namespace pard
