// Bindings for the stage scheduler: Profile, Policy, StageScheduler and REASONS. Thin: validation
// and logic live in cpp/include/pard/{profile,policy,snapshot,stage_scheduler}.hpp (published terms
// are checked once, by PublishedTerms::from_seconds); this file converts seconds <-> ns.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "llm_spec_arg.hpp"
#include "pard/policy.hpp"
#include "pard/profile.hpp"
#include "pard/stage_scheduler.hpp"
#include "register.hpp"
#include "seconds.hpp"

namespace py = pybind11;

namespace pard::bind {
namespace {

// form_batch keeps the GIL below this many queued requests (see the comment at its binding).
constexpr std::size_t kReleaseGilAbove = 4096;

using MaskArg = std::optional<py::array_t<std::uint8_t, py::array::c_style>>;

// The caller's cancelled mask (request id % size -> cancelled), checked; {nullptr, 0} when absent.
std::pair<const std::uint8_t*, std::uint64_t> cancelled_mask(const MaskArg& cancelled, const char* call) {
    if (!cancelled) return {nullptr, 0};
    if (cancelled->ndim() != 1 || cancelled->size() < 1) {
        throw std::invalid_argument(std::string(call) + ": cancelled must be a non-empty 1-D uint8 array, got ndim=" +
                                    std::to_string(cancelled->ndim()) + " size=" + std::to_string(cancelled->size()));
    }
    return {cancelled->data(), static_cast<std::uint64_t>(cancelled->size())};
}

}  // namespace

void register_scheduler(py::module_& m) {
    m.attr("DURATION_SCALE_BOUNDS") = py::make_tuple(kDurationScaleMin, kDurationScaleMax);
    m.attr("REASONS") = std::vector<std::string>(kReasonNames, kReasonNames + kNumReasons);

    py::class_<Profile>(m, "Profile", "Batch execution duration d(b), piecewise-linear through measured points (s).")
        .def(py::init([](const std::vector<std::int64_t>& b, const std::vector<double>& d) {
                 return Profile::from_seconds(b, d);
             }),
             py::arg("batch_sizes"), py::arg("durations_s"))
        .def("duration", [](const Profile& p, std::int64_t b) {
                 if (b < 1) throw std::invalid_argument("batch=" + std::to_string(b) + " must be >= 1");
                 return to_s(p.duration_ns(b));
             }, py::arg("batch"))
        .def_property_readonly("max_batch", &Profile::max_batch)
        .def("points", [](const Profile& p) {
            std::vector<double> d;
            for (auto v : p.durations_ns()) d.push_back(to_s(v));
            return py::make_tuple(p.batch_sizes(), d);
        })
        .def("__repr__", [](const Profile& p) {
            std::string s = "Profile(";
            for (std::size_t i = 0; i < p.batch_sizes().size(); ++i) {
                if (i) s += ", ";
                s += std::to_string(p.batch_sizes()[i]) + ": " + std::to_string(to_s(p.durations_ns()[i])) + "s";
            }
            return s + ")";
        });

    py::class_<Policy>(m, "Policy", "A policy value: order x drop rule x parameters (DESIGN 3.6).")
        .def(py::init([](const std::string& order, const std::string& drop, double thr_s, double alpha,
                         bool tiered, bool reactive, std::int64_t max_queue, bool max_queue_entry_only, bool shed,
                         bool pace, const std::string& overload_below, bool coherent_rank, bool live_queues, bool virtual_queue,
                         bool llm_tokens, double llm_quantile, bool llm_stop, bool llm_lbf) {
                 Policy p;
                 p.llm_tokens = llm_tokens;
                 p.llm_stop = llm_stop;
                 p.llm_lbf = llm_lbf;
                 p.llm_quantile = llm_quantile;
                 p.order = parse_order(order);
                 p.drop = parse_drop(drop);
                 p.tiered = tiered;
                 p.reactive = reactive;
                 p.shed = shed;
                 p.pace = pace;
                 p.overload_below = parse_below(overload_below);
                 p.coherent_rank = coherent_rank;
                 p.live_queues = live_queues;
                 p.virtual_queue = virtual_queue;
                 p.max_queue = max_queue;
                 p.max_queue_entry_only = max_queue_entry_only;
                 if (!std::isfinite(thr_s) || thr_s < 0.0) {
                     throw std::invalid_argument("Policy: dagor_threshold_s=" + std::to_string(thr_s) + " must be finite and >= 0");
                 }
                 p.dagor_threshold_ns = to_ns(thr_s, "dagor_threshold_s");
                 p.dagor_alpha = alpha;
                 p.validate();
                 return p;
             }),
             py::kw_only(), py::arg("order"), py::arg("drop"), py::arg("dagor_threshold_s") = 0.02,
             py::arg("dagor_alpha") = 0.4, py::arg("tiered") = false, py::arg("reactive") = false,
             py::arg("max_queue") = 0, py::arg("max_queue_entry_only") = false, py::arg("shed") = true,
             py::arg("pace") = false, py::arg("overload_below") = "none", py::arg("coherent_rank") = false,
             py::arg("live_queues") = false, py::arg("virtual_queue") = false, py::arg("llm_tokens") = false,
             py::arg("llm_quantile") = 0.5, py::arg("llm_stop") = false, py::arg("llm_lbf") = false)
        .def_property_readonly("order", [](const Policy& p) { return std::string(order_name(p.order)); })
        .def_property_readonly("drop", [](const Policy& p) { return std::string(drop_name(p.drop)); })
        .def_property_readonly("dagor_threshold_s", [](const Policy& p) { return to_s(p.dagor_threshold_ns); })
        .def_property_readonly("dagor_alpha", [](const Policy& p) { return p.dagor_alpha; })
        .def_property_readonly("tiered", [](const Policy& p) { return p.tiered; })
        .def_property_readonly("reactive", [](const Policy& p) { return p.reactive; })
        .def_property_readonly("shed", [](const Policy& p) { return p.shed; })
        .def_property_readonly("pace", [](const Policy& p) { return p.pace; })
        .def_property_readonly("overload_below", [](const Policy& p) { return std::string(below_name(p.overload_below)); })
        .def_property_readonly("coherent_rank", [](const Policy& p) { return p.coherent_rank; })
        .def_property_readonly("live_queues", [](const Policy& p) { return p.live_queues; })
        .def_property_readonly("virtual_queue", [](const Policy& p) { return p.virtual_queue; })
        .def_property_readonly("max_queue", [](const Policy& p) { return p.max_queue; })
        .def_property_readonly("max_queue_entry_only", [](const Policy& p) { return p.max_queue_entry_only; })
        .def_property_readonly("llm_tokens", [](const Policy& p) { return p.llm_tokens; })
        .def_property_readonly("llm_quantile", [](const Policy& p) { return p.llm_quantile; })
        .def_property_readonly("llm_stop", [](const Policy& p) { return p.llm_stop; })
        .def_property_readonly("llm_lbf", [](const Policy& p) { return p.llm_lbf; })
        .def("__eq__", [](const Policy& a, const Policy& b) {
            return a.order == b.order && a.drop == b.drop && a.dagor_threshold_ns == b.dagor_threshold_ns &&
                   a.dagor_alpha == b.dagor_alpha && a.tiered == b.tiered && a.reactive == b.reactive && a.shed == b.shed &&
                   a.pace == b.pace && a.overload_below == b.overload_below && a.coherent_rank == b.coherent_rank &&
                   a.live_queues == b.live_queues && a.virtual_queue == b.virtual_queue &&
                   a.max_queue == b.max_queue && a.max_queue_entry_only == b.max_queue_entry_only &&
                   a.llm_tokens == b.llm_tokens && a.llm_quantile == b.llm_quantile && a.llm_stop == b.llm_stop && a.llm_lbf == b.llm_lbf;
        })
        .def("__repr__", [](const Policy& p) {
            return std::string("Policy(order='") + order_name(p.order) + "', drop='" + drop_name(p.drop) +
                   "', dagor_threshold_s=" + std::to_string(to_s(p.dagor_threshold_ns)) +
                   ", dagor_alpha=" + std::to_string(p.dagor_alpha) + ", tiered=" + (p.tiered ? "True" : "False") +
                   ", reactive=" + (p.reactive ? "True" : "False") + ", shed=" + (p.shed ? "True" : "False") +
                   ", pace=" + (p.pace ? "True" : "False") + ", overload_below='" + below_name(p.overload_below) +
                   "', coherent_rank=" + (p.coherent_rank ? "True" : "False") +
                   ", live_queues=" + (p.live_queues ? "True" : "False") +
                   ", virtual_queue=" + (p.virtual_queue ? "True" : "False") + ", max_queue=" + std::to_string(p.max_queue) +
                   ", max_queue_entry_only=" + (p.max_queue_entry_only ? "True" : "False") +
                   ", llm_tokens=" + (p.llm_tokens ? "True" : "False") + ", llm_quantile=" + std::to_string(p.llm_quantile) +
                   ", llm_stop=" + (p.llm_stop ? "True" : "False") +
                   ", llm_lbf=" + (p.llm_lbf ? "True" : "False") + ")";
        });

    py::class_<StageScheduler>(m, "StageScheduler", "One stage's ingress ring, DEPQ, order and drop rule.")
        .def(py::init([](int stage, const Profile& profile, std::int64_t max_batch, const Policy& policy,
                         double budget_fraction, std::int64_t ring_capacity, const std::vector<double>& tier_weights,
                         bool entry, std::optional<py::dict> llm) {
                 if (ring_capacity < 2) {
                     throw std::invalid_argument("StageScheduler: ring_capacity=" + std::to_string(ring_capacity) +
                                                 " must be a power of two >= 2");
                 }
                 StageConfig c;
                 c.stage = stage;
                 c.profile = profile;
                 c.max_batch = max_batch;
                 c.policy = policy;
                 c.budget_fraction = budget_fraction;
                 c.ring_capacity = static_cast<std::size_t>(ring_capacity);
                 c.tier_weights = tier_weights;
                 c.entry = entry;
                 if (llm) {  // an LLM stage: its d(b) is the decode step, its batch the running sequences
                     c.llm = true;
                     c.llm_spec = llm_spec_from(*llm, "StageScheduler: llm");
                     c.profile = c.llm_spec.decode;
                     c.max_batch = c.llm_spec.max_seqs;
                 }
                 return std::make_unique<StageScheduler>(std::move(c));
             }),
             py::kw_only(), py::arg("stage"), py::arg("profile"), py::arg("max_batch"), py::arg("policy"),
             py::arg("budget_fraction"), py::arg("ring_capacity") = 65536,
             py::arg("tier_weights") = std::vector<double>{}, py::arg("entry") = true, py::arg("llm") = py::none())
        .def("submit", [](StageScheduler& s, std::uint64_t id, double send_s, double deadline_s, double arrival_s,
                          std::int32_t tier) {
                 return s.submit(Request{id, to_ns(send_s, "send_s"), to_ns(deadline_s, "deadline_s"),
                                         to_ns(arrival_s, "arrival_s"), tier, 0});
             },
             py::arg("id"), py::arg("send_s"), py::arg("deadline_s"), py::arg("arrival_s"), py::arg("tier") = 0,
             "Offer a request to the stage's ingress ring (any thread, lock-free). Times in seconds. "
             "Returns False when the ring is full (back-pressure: the caller must reject the request).")
        .def("publish", [](StageScheduler& s, double downstream_s, double mu, double eps, double queue_delay_s,
                           double admit_fraction, double service_rate, double duration_scale, double path_rate,
                           double overload_downstream_s, double floor_downstream_s, double outrank_downstream_s) {
                 s.publish(PublishedTerms::from_seconds(downstream_s, mu, eps, queue_delay_s, admit_fraction,
                                                        service_rate, duration_scale, path_rate,
                                                        overload_downstream_s, floor_downstream_s,
                                                        outrank_downstream_s));
             },
             py::kw_only(), py::arg("downstream_s"), py::arg("mu"), py::arg("eps"), py::arg("queue_delay_s"),
             py::arg("admit_fraction") = 1.0, py::arg("service_rate") = 0.0, py::arg("duration_scale") = 1.0,
             py::arg("path_rate") = 0.0, py::arg("overload_downstream_s") = 0.0, py::arg("floor_downstream_s") = 0.0,
             py::arg("outrank_downstream_s") = 0.0,
             "Publish the planner's terms (DESIGN 3.2, 3.5) as one snapshot and step the adaptive order "
             "(3.3: mu > 1+eps -> HBF, mu < 1-eps -> LBF, else keep). ValueError for negative or non-finite "
             "values or admit_fraction outside [0, 1].")
        .def("observe_batch", [](StageScheduler& s, std::int64_t size, double measured_s) {
                 if (size < 1) throw py::value_error("observe_batch: size=" + std::to_string(size) + " must be >= 1");
                 s.observe_batch(size, to_ns(measured_s, "measured_s"));
             },
             py::arg("size"), py::arg("measured_s"),
             "Record that a batch of `size` requests ran for measured_s seconds (a live worker and the "
             "simulator do this after every batch): the stage's own measured / profiled ratio, used until "
             "the planner publishes a duration_scale (publish with duration_scale=0: none measured yet).")
        .def("llm_calibration", [](StageScheduler& s) -> py::object {
                 const llm::LlmCost* c = s.llm().cost();
                 if (c == nullptr) return py::none();
                 return py::object(bind::calibration_dict(*c));
             },
             "An LLM stage's output-length calibration {quantile, token_aware, n, under} (under: finished "
             "requests whose length was at most the quantile predicted at their join); None for a DNN stage. "
             "Read it when the stage's workers are stopped (the record is kept under the batch-forming lock).")
        .def_property_readonly("own_duration_scale", &StageScheduler::own_duration_scale,
             "The stage's own measured / profiled batch-duration ratio over every observed batch, clipped to "
             "DURATION_SCALE_BOUNDS; 1 before the first.")
        .def("expected_duration", [](const StageScheduler& s, std::int64_t b) {
                 if (b < 1) throw py::value_error("expected_duration: b=" + std::to_string(b) + " must be >= 1");
                 return static_cast<double>(s.expected_duration_ns(b)) * 1e-9;
             },
             py::arg("b"),
             "d_k(b) in seconds as the stage expects it now: the profile's times the duration_scale in force.")
        .def("form_batch", [](StageScheduler& s, double now_s, double t_e_s,
                              std::optional<py::array_t<std::uint8_t, py::array::c_style>> cancelled) {
                 const std::int64_t now = to_ns(now_s, "now_s");
                 const std::int64_t t_e = to_ns(t_e_s, "expected_start_s");
                 const auto checked = cancelled_mask(cancelled, "form_batch");
                 const std::uint8_t* mask = checked.first;
                 const std::uint64_t slots = checked.second;
                 // Request id -> cancelled: the caller's mask, read in C++ (no Python call per request).
                 auto is_cancelled = [mask, slots](std::uint64_t id) { return mask[id % slots] != 0; };
                 BatchResult out;
                 // A typical call is ~1 us of C++ work: releasing the GIL would cost more than it saves
                 // (re-acquiring it from busy worker threads measured 148 us mean wall time per call in
                 // live runs vs 8 us when kept). Release it only when a large ring drain is due.
                 if (s.queued() > kReleaseGilAbove) {
                     py::gil_scoped_release release;
                     if (mask) s.form_batch(now, t_e, out, is_cancelled); else s.form_batch(now, t_e, out);
                 } else {
                     if (mask) s.form_batch(now, t_e, out, is_cancelled); else s.form_batch(now, t_e, out);
                 }
                 py::array_t<std::uint64_t> ids(static_cast<py::ssize_t>(out.batch.size()));
                 py::array_t<std::uint64_t> dropped(static_cast<py::ssize_t>(out.drops.size()));
                 py::array_t<std::int32_t> reasons(static_cast<py::ssize_t>(out.drops.size()));
                 auto pi = ids.mutable_unchecked<1>();
                 auto pd = dropped.mutable_unchecked<1>();
                 auto pr = reasons.mutable_unchecked<1>();
                 for (std::size_t i = 0; i < out.batch.size(); ++i) pi(static_cast<py::ssize_t>(i)) = out.batch[i].id;
                 for (std::size_t i = 0; i < out.drops.size(); ++i) {
                     pd(static_cast<py::ssize_t>(i)) = out.drops[i].request.id;
                     pr(static_cast<py::ssize_t>(i)) = static_cast<std::int32_t>(out.drops[i].reason);
                 }
                 return py::make_tuple(ids, dropped, reasons);
             },
             py::arg("now_s"), py::arg("expected_start_s"), py::arg("cancelled") = py::none(),
             "Form the next batch at now_s for a batch expected to start at expected_start_s (DESIGN 3.1-3.2). "
             "cancelled: optional uint8[L] mask; a queued request with cancelled[id % L] != 0 is discarded "
             "when popped (reason 'cancelled', no place in the batch). The caller keeps the array alive and "
             "its slots unambiguous (no two queued ids congruent mod L). "
             "Returns (batch ids uint64[n] in service order, dropped ids uint64[m], reason codes int32[m] "
             "indexing REASONS). Releases the GIL only when more than 4096 requests are queued (short calls keep it).")
        .def("purge", [](StageScheduler& s, double now_s, double t_e_s,
                         std::optional<py::array_t<std::uint8_t, py::array::c_style>> cancelled) {
                 const std::int64_t now = to_ns(now_s, "now_s");
                 const std::int64_t t_e = to_ns(t_e_s, "expected_start_s");
                 const auto checked = cancelled_mask(cancelled, "purge");
                 const std::uint8_t* mask = checked.first;
                 const std::uint64_t slots = checked.second;
                 std::vector<Drop> drops;
                 if (mask) {
                     s.purge(now, t_e, drops, [mask, slots](std::uint64_t id) { return mask[id % slots] != 0; });
                 } else {
                     s.purge(now, t_e, drops);
                 }
                 py::array_t<std::uint64_t> dropped(static_cast<py::ssize_t>(drops.size()));
                 py::array_t<std::int32_t> reasons(static_cast<py::ssize_t>(drops.size()));
                 auto pd = dropped.mutable_unchecked<1>();
                 auto pr = reasons.mutable_unchecked<1>();
                 for (std::size_t i = 0; i < drops.size(); ++i) {
                     pd(static_cast<py::ssize_t>(i)) = drops[i].request.id;
                     pr(static_cast<py::ssize_t>(i)) = static_cast<std::int32_t>(drops[i].reason);
                 }
                 return py::make_tuple(dropped, reasons);
             },
             py::arg("now_s"), py::arg("expected_start_s"), py::arg("cancelled") = py::none(),
             "Drain the ring and, for the pard rule, drop from the low-budget end every request that a batch "
             "of one starting at expected_start_s would miss (DESIGN 3.2; for a stage whose workers are all "
             "busy: Triton #7512); no batch is formed. Other rules: nothing. cancelled: as for form_batch. "
             "Returns (dropped ids uint64[m], reason codes int32[m] indexing REASONS).")
        .def_property_readonly("current_order", [](const StageScheduler& s) { return std::string(order_name(s.current_order())); })
        .def_property_readonly("stage", [](const StageScheduler& s) { return s.config().stage; })
        .def_property_readonly("max_batch", [](const StageScheduler& s) { return s.config().max_batch; })
        .def("queued", &StageScheduler::queued)
        .def("set_below", [](StageScheduler& s, const std::vector<StageScheduler*>& below) {
                 s.set_below(std::vector<const StageScheduler*>(below.begin(), below.end()));
             },
             py::arg("below"), py::keep_alive<1, 2>(),
             "The stages below this one, read by the pop rule under Policy.overload_below (set once, before "
             "any batch forms; the list is kept alive with this scheduler).")
        .def_property_readonly("overloaded_now", &StageScheduler::overloaded_now)
        .def("queue_lag", [](const StageScheduler& s, double transit_s, double min_weight) {
                 return to_s(s.queue_lag_ns(to_ns(transit_s, "transit_s"), min_weight));
             },
             py::arg("transit_s") = 0.0, py::arg("min_weight") = 0.0,
             "queue_lag_s for a request reaching this stage transit_s from now, of a tier weighing min_weight: "
             "while the stage serves the highest-weight tier first (HBF, and LBF unless keyed by arrival), "
             "only the queued requests of tiers weighing at least min_weight count.")
        .def_property_readonly("queue_lag_s", [](const StageScheduler& s) { return to_s(s.queue_lag_ns()); },
                               "How much longer than the published queue_delay_s a request arriving now would wait "
                               "by the queue now: max(0, queued / service_rate - queue_delay_s) (s; 0 while the "
                               "service rate is unknown or the stage is unmeasured: no batch run, no ratio "
                               "published). What the stages above read under Policy.live_queues.")
        .def_property("parallel", &StageScheduler::parallel, &StageScheduler::set_parallel,
                      "Whether this stage lies on one of several parallel DAG branches (some other stage is neither "
                      "above nor below it), where Policy.coherent_rank applies (set once, before any batch forms; "
                      "parallel_branches).");

    m.def("stages_below", &stages_below, py::arg("successors"),
          "For each stage of a pipeline given by its successor lists, every stage reachable from it (itself "
          "excluded), ascending.");
    m.def("parallel_branches", [](const std::vector<std::vector<int>>& successors) {
              const auto v = parallel_branches(successors);
              return std::vector<bool>(v.begin(), v.end());
          }, py::arg("successors"),
          "For each stage of a pipeline given by its successor lists, whether it lies on one of several "
          "parallel branches: some other stage is neither above nor below it (what StageScheduler.parallel takes).");
}

}  // namespace pard::bind
