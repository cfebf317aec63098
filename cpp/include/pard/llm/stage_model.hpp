// pard/llm/stage_model.hpp — an LLM stage's cost model (DESIGN §3.8): what one request costs there, in
// the terms the drop rules and the load factor use.
//
// LlmStageSpec is the stage's profile in two phases: prefill(n) = base + per_token x n input tokens, and a
// decode step's duration as a function of the sequences running together (a Profile, as d(b) is for a DNN
// stage), plus its limits (max_seqs, the KV budget in tokens, the output cap). LlmCost adds what is not
// known at admission, the output length: a policy with llm_tokens reads the stage's learned distribution
// (a quantile of it, conditioned on input length, tier, hint and the tokens already generated; the
// OutputLengthPredictor of pard/llm/output_length.hpp), every other policy the running means of finished
// requests.
// Until kWarmup sequences have finished, both price a request at one output token.
//
// Costs, for a request r joining a batch that then runs n sequences:
//   cost(r, n) = prefill(in_r) + q_r x token(n)      q_r: predicted output tokens (>= 1); token(n) = decode(n),
//                                                    stretched (token-aware) by the share of the engine the
//                                                    joiners' prefills took in the last 2 s (token_ns)
//   work(r)    = prefill(in_r) + q_r x step(M) / M   worker-seconds at a full batch of M = max_seqs:
//                the unit of the stage's load (mu) and service rate, so a burst of long prompts or long
//                answers reads as the overload it is.
// Not thread-safe: the stage's batch-forming lock (or the single-threaded simulator) serialises it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <utility>
#include <stdexcept>
#include <string>

#include "pard/llm/output_length.hpp"
#include "pard/profile.hpp"
#include "pard/request.hpp"

namespace pard::llm {

struct LlmStageSpec {
    std::int64_t prefill_base_ns = 0;      // prefill(n) = base + per_token x n
    double prefill_per_token_ns = 0.0;
    Profile decode;                        // one decode step's duration vs sequences running together
    std::int64_t max_seqs = 1;             // most sequences running together on one worker
    std::int64_t kv_tokens = 1;            // KV budget per worker, in tokens
    std::int32_t max_output_tokens = 1024; // a request's output cap, and the predictor's prior

    [[nodiscard]] std::int64_t prefill_ns(double in_tokens) const noexcept {
        return prefill_base_ns + static_cast<std::int64_t>(std::llround(prefill_per_token_ns * in_tokens));
    }
    [[nodiscard]] std::int64_t step_ns(std::int64_t running) const noexcept {
        return decode.duration_ns(running < 1 ? 1 : running);
    }
    // The most tokens r may emit here: its hint, within the stage's cap.
    [[nodiscard]] std::int32_t cap(const Request& r) const noexcept {
        return r.max_tokens > 0 ? std::min(r.max_tokens, max_output_tokens) : max_output_tokens;
    }
    // KV tokens r holds from its join to its leave (no preemption): its prompt and its largest answer.
    [[nodiscard]] std::int64_t reservation(const Request& r) const noexcept {
        return static_cast<std::int64_t>(r.in_tokens) + cap(r);
    }

    // Throws std::invalid_argument naming the field (prefixed by `where`) and its value.
    void validate(const std::string& where) const {
        if (prefill_base_ns < 0) throw std::invalid_argument(where + ".prefill.base=" + std::to_string(prefill_base_ns) + " ns must be >= 0");
        if (!(std::isfinite(prefill_per_token_ns) && prefill_per_token_ns >= 0.0)) {
            throw std::invalid_argument(where + ".prefill.per_token=" + std::to_string(prefill_per_token_ns) +
                                        " ns must be finite and >= 0");
        }
        if (max_seqs < 1 || max_seqs > Profile::kMaxTable) {
            throw std::invalid_argument(where + ".max_seqs=" + std::to_string(max_seqs) + " must be in [1, " +
                                        std::to_string(Profile::kMaxTable) + "]");
        }
        if (kv_tokens < 1) throw std::invalid_argument(where + ".kv_tokens=" + std::to_string(kv_tokens) + " must be >= 1");
        if (max_output_tokens < 1) {
            throw std::invalid_argument(where + ".max_output_tokens=" + std::to_string(max_output_tokens) + " must be >= 1");
        }
    }
};

class LlmCost {
public:
    // Finished sequences before the length model answers (its own min_samples): until then a request is
    // priced at the mean length finished so far (one token before any), so the stage admits while it learns.
    static constexpr std::int64_t kWarmup = 32;
    static constexpr std::int64_t kPrefillWindowNs = 2'000'000'000;  // observe_step's window
    static constexpr double kMaxPrefillShare = 0.9;                  // a token at most 10 x decode(n)

    LlmCost(LlmStageSpec spec, bool token_aware, double quantile, int tiers)
        : spec_(std::move(spec)), tokens_(token_aware), q_(quantile),
          lengths_(OutputLengthConfig{spec_.max_output_tokens, 2000.0, 32, tiers < 1 ? 1 : tiers}) {}

    [[nodiscard]] const LlmStageSpec& spec() const noexcept { return spec_; }
    [[nodiscard]] bool token_aware() const noexcept { return tokens_; }
    [[nodiscard]] double quantile() const noexcept { return q_; }

    // Predicted output tokens of r having generated `generated` so far: > generated, <= its cap.
    // Token-aware: the quantile of the learned distribution; else the running mean of finished
    // requests' lengths (the cap before any), whatever r says.
    [[nodiscard]] std::int32_t predicted_len(const Request& r, std::int32_t generated = 0) const {
        const std::int32_t cap = spec_.cap(r);
        std::int32_t q = 0;
        if (done_ < kWarmup) {
            // Learning. Before anything finished, one token: the prior (the cap) would refuse every request
            // whose cap does not fit its SLO, and so never learn. Then the mean length finished so far,
            // within r's cap: a request that cannot finish even at the lengths seen is refused while the
            // histograms fill (a cold start or a restart must not admit what is already known to be late).
            q = done_ > 0 ? static_cast<std::int32_t>(std::llround(sum_out_ / static_cast<double>(done_)))
                          : generated + 1;
        } else if (tokens_) {
            q = lengths_.quantile(r.in_tokens, r.tier, r.max_tokens, q_, generated);
        } else {
            q = done_ > 0 ? static_cast<std::int32_t>(std::llround(sum_out_ / static_cast<double>(done_)))
                          : spec_.max_output_tokens;
            q = std::min(q, spec_.max_output_tokens);
        }
        if (q <= generated) q = generated + 1;
        return tokens_ ? std::min(q, std::max(cap, generated + 1)) : q;
    }

    // The prefill r needs: its own input length, or (without token knowledge) the running mean's.
    [[nodiscard]] std::int64_t prefill_ns(const Request& r) const noexcept {
        return spec_.prefill_ns(tokens_ ? static_cast<double>(r.in_tokens) : mean_in());
    }

    // cost(r, n) of the header comment (ns): r's time at this stage if it joins a batch of n.
    [[nodiscard]] std::int64_t cost_ns(const Request& r, std::int64_t running) const {
        return prefill_ns(r) + static_cast<std::int64_t>(predicted_len(r)) * token_ns(running);
    }

    // The time between two tokens of a running sequence (ns) with n running, as an admission sees it.
    // Every step also runs its joiners' prefills, so under load a token takes longer than decode(n): a
    // token-aware estimate divides decode(n) by the share of the recent window the stage's workers did not
    // spend on prefills (observe_step); the others take decode(n). (The decode-time check keeps decode(n):
    // it stops a sequence only once even the uncontended pace cannot finish it.)
    [[nodiscard]] std::int64_t token_ns(std::int64_t running) const noexcept {
        const std::int64_t d = spec_.step_ns(running);
        if (!tokens_ || prefill_share_ <= 0.0) return d;
        return static_cast<std::int64_t>(std::llround(static_cast<double>(d) / (1.0 - prefill_share_)));
    }
    // A step started at t_ns ran prefill_ns of joiners' prefills, with `workers` serving the stage.
    void observe_step(std::int64_t t_ns, std::int64_t prefill_ns, int workers) {
        if (prefill_ns > 0) {
            prefills_.emplace_back(t_ns, prefill_ns);
            prefill_sum_ += prefill_ns;
        }
        workers_ = workers < 1 ? 1.0 : static_cast<double>(workers);
        trim(t_ns);
    }
    // Forgets the prefills older than the window (kPrefillWindowNs) at now_ns: an idle stage has none.
    void trim(std::int64_t now_ns) {
        while (!prefills_.empty() && prefills_.front().first <= now_ns - kPrefillWindowNs) {
            prefill_sum_ -= prefills_.front().second;
            prefills_.pop_front();
        }
        const double share = static_cast<double>(prefill_sum_) / (static_cast<double>(kPrefillWindowNs) * workers_);
        prefill_share_ = std::min(share, kMaxPrefillShare);
    }

    // work(r) of the header comment (s).
    [[nodiscard]] double work_s(const Request& r) const {
        const double step = static_cast<double>(spec_.step_ns(spec_.max_seqs)) / static_cast<double>(spec_.max_seqs);
        return (static_cast<double>(prefill_ns(r)) + static_cast<double>(predicted_len(r)) * step) * 1e-9;
    }
    // work(r) in ns.
    [[nodiscard]] std::int64_t work_ns(const Request& r) const { return static_cast<std::int64_t>(std::llround(work_s(r) * 1e9)); }

    // A sequence finished after `out` tokens: the distribution and the running means learn it.
    void observe(const Request& r, std::int32_t out) {
        lengths_.observe(r.in_tokens, r.tier, out);
        sum_out_ += out;
        sum_in_ += r.in_tokens;
        ++done_;
    }
    // Calibration: a request predicted `predicted` tokens at admission finished with `actual`.
    void record_calibration(std::int32_t predicted, std::int32_t actual) { lengths_.record_calibration(predicted, actual); }
    [[nodiscard]] OutputLengthPredictor::Calibration calibration() const { return lengths_.calibration(); }

    [[nodiscard]] double mean_in() const noexcept { return done_ > 0 ? sum_in_ / static_cast<double>(done_) : 0.0; }

private:
    LlmStageSpec spec_;
    bool tokens_;
    double q_;
    OutputLengthPredictor lengths_;
    double sum_out_ = 0.0;
    std::deque<std::pair<std::int64_t, std::int64_t>> prefills_;  // (step start, its prefill ns) in the window
    std::int64_t prefill_sum_ = 0;
    double workers_ = 1.0;
    double prefill_share_ = 0.0;  // of the window's worker time, spent on prefills (capped)
    double sum_in_ = 0.0;
    std::int64_t done_ = 0;
};

}  // namespace pard::llm
