// pard/outcome.hpp — a request's terminal state (DESIGN §4). Set once per request, counted once.
#pragma once

#include <cstdint>

namespace pard {

// Codes as exposed in Simulator.outcomes()["state"].
enum class Outcome : std::int8_t {
    kPending = 0,   // still in flight
    kOnTime = 1,    // left the last stage by its deadline (inclusive)
    kLate = 2,      // left the last stage after its deadline
    kDropped = 3,   // dropped by a stage (stage and reason recorded)
    kRejected = 4,  // refused at admission (full ring or the admission share)
    kFailed = 5,    // the executor raised (live runtime only)
};

}  // namespace pard
