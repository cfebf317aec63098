// pard/rules/nexus_window.hpp — Nexus's sliding batch window over the queue (DESIGN §3.6, nexus).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "pard/batch.hpp"
#include "pard/estimator.hpp"

namespace pard::rules {

// Scan the queue in order, a request feasible iff it finishes this stage within its stage budget; the
// first run of b feasible requests is the batch and every request scanned before it is dropped (reason
// window). With no full run, the infeasible are dropped and the first b feasible form the batch.
// pop(): the next request in order; empty(): the queue is exhausted; cancelled(id): a sibling branch
// dropped it (reason cancelled); put_back(r): a feasible request the batch has no room for.
template <class Pop, class Empty, class Cancelled, class PutBack>
void nexus_window(BatchResult& out, std::vector<Request>& scratch, std::size_t b, std::int64_t t_e_ns, std::int64_t d,
                  double budget_fraction, Pop&& pop, Empty&& empty, Cancelled& cancelled, PutBack&& put_back) {
    scratch.clear();
    std::size_t run_start = 0;  // index in scratch where the current run of feasible requests starts
    bool found = false;
    while (!empty()) {
        const Request r = pop();
        if (cancelled(r.id)) {
            out.drops.push_back(Drop{r, Reason::kCancelled});
            continue;
        }
        scratch.push_back(r);
        if (!nexus_feasible(r, t_e_ns, d, budget_fraction)) {
            run_start = scratch.size();
        } else if (scratch.size() - run_start == b) {
            found = true;
            break;
        }
    }
    if (found) {
        for (std::size_t i = 0; i < run_start; ++i) out.drops.push_back(Drop{scratch[i], Reason::kWindow});
        out.batch.assign(scratch.begin() + static_cast<std::ptrdiff_t>(run_start), scratch.end());
        return;
    }
    for (const Request& r : scratch) {
        if (!nexus_feasible(r, t_e_ns, d, budget_fraction)) {
            out.drops.push_back(Drop{r, Reason::kWindow});
        } else if (out.batch.size() < b) {
            out.batch.push_back(r);
        } else {
            put_back(r);
        }
    }
}

}  // namespace pard::rules
