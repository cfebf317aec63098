// Bindings for the discrete-event simulator (cpp/include/pard/simulator.hpp). Thin: converts the
// stage dicts and NumPy arrays (seconds) into a SimConfig (ns), releases the GIL in run_until, and
// hands statistics back as NumPy arrays. No Python call happens per request.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "compute_split_dict.hpp"
#include "llm_spec_arg.hpp"
#include "pard/simulator.hpp"
#include "register.hpp"
#include "seconds.hpp"

namespace py = pybind11;

namespace pard::bind {
namespace {

using F64In = py::array_t<double, py::array::c_style | py::array::forcecast>;
using I32In = py::array_t<std::int32_t, py::array::c_style | py::array::forcecast>;

template <class T>
py::array_t<T> to_numpy(const std::vector<T>& v) {
    py::array_t<T> a(static_cast<py::ssize_t>(v.size()));
    if (!v.empty()) std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(T));
    return a;
}

py::array_t<double> ns_to_seconds(const std::vector<std::int64_t>& v) {
    py::array_t<double> a(static_cast<py::ssize_t>(v.size()));
    double* p = a.mutable_data();
    for (std::size_t i = 0; i < v.size(); ++i) p[i] = to_s(v[i]);
    return a;
}

py::array_t<std::int64_t> scalar_array(std::int64_t x) {
    py::array_t<std::int64_t> a(1);
    a.mutable_data()[0] = x;
    return a;
}

std::vector<std::int64_t> seconds_array_to_ns(const F64In& a, const char* field) {
    if (a.ndim() != 1) throw std::invalid_argument(std::string(field) + " must be a 1-D array");
    std::vector<std::int64_t> out(static_cast<std::size_t>(a.shape(0)));
    const double* p = a.data();
    for (std::size_t i = 0; i < out.size(); ++i) {
        if (!std::isfinite(p[i]) || std::fabs(p[i]) > 9.0e9) {
            throw std::invalid_argument(std::string(field) + "[" + std::to_string(i) + "]=" + std::to_string(p[i]) +
                                        " must be a finite number of seconds");
        }
        out[i] = static_cast<std::int64_t>(std::llround(p[i] * 1e9));
    }
    return out;
}

SimStageConfig parse_stage(const py::handle& h, std::size_t i) {
    const std::string where = "stages[" + std::to_string(i) + "]";
    if (!py::isinstance<py::dict>(h)) throw py::type_error(where + " must be a dict");
    const auto d = py::reinterpret_borrow<py::dict>(h);
    static const std::set<std::string> known{"name", "profile", "max_batch", "workers", "successors",
                                             "budget_fraction", "exec_scale", "kind", "prefill_base_s",
                                             "prefill_per_token_s", "decode", "max_seqs", "kv_tokens",
                                             "max_output_tokens"};
    for (const auto& kv : d) {
        const auto key = py::str(kv.first).cast<std::string>();
        if (known.count(key) == 0) {
            throw std::invalid_argument(where + " has unknown key '" + key +
                                        "' (expected name, profile, max_batch, workers, successors, budget_fraction, exec_scale; "
                                        "for kind 'llm': prefill_base_s, prefill_per_token_s, decode, max_seqs, kv_tokens, "
                                        "max_output_tokens)");
        }
    }
    const std::string kind = d.contains("kind") ? py::str(d["kind"]).cast<std::string>() : "dnn";
    if (kind != "dnn" && kind != "llm") throw std::invalid_argument(where + ".kind='" + kind + "' is not 'dnn' or 'llm'");
    SimStageConfig c;
    c.llm = kind == "llm";
    const std::vector<const char*> need =
        c.llm ? std::vector<const char*>{"prefill_base_s", "prefill_per_token_s", "decode", "max_seqs", "kv_tokens",
                                         "max_output_tokens", "workers"}
              : std::vector<const char*>{"profile", "max_batch", "workers"};
    for (const char* req : need) {
        if (!d.contains(req)) throw std::invalid_argument(where + " is missing the key '" + std::string(req) + "'");
    }
    c.name = d.contains("name") ? py::str(d["name"]).cast<std::string>() : "stage" + std::to_string(i);
    if (c.llm) {  // the scheduler's d(b) is the decode step, its batch the running sequences
        c.llm_spec = llm_spec_from(d, "Simulator: " + where);
        c.profile = c.llm_spec.decode;
        c.max_batch = c.llm_spec.max_seqs;
    } else {
        if (!py::isinstance<Profile>(d["profile"])) throw py::type_error(where + ".profile must be a pard._core.Profile");
        c.profile = d["profile"].cast<Profile>();
        c.max_batch = d["max_batch"].cast<std::int64_t>();
    }
    c.workers = d["workers"].cast<int>();
    if (d.contains("successors")) c.successors = d["successors"].cast<std::vector<int>>();
    c.budget_fraction = d.contains("budget_fraction") ? d["budget_fraction"].cast<double>() : 1.0;
    c.exec_scale = d.contains("exec_scale") ? d["exec_scale"].cast<double>() : 1.0;
    if (!(std::isfinite(c.exec_scale) && c.exec_scale > 0.0)) {
        throw std::invalid_argument(where + ".exec_scale=" + std::to_string(c.exec_scale) + " must be a finite number > 0");
    }
    if (c.max_batch < 1) throw std::invalid_argument(where + ".max_batch=" + std::to_string(c.max_batch) + " must be >= 1");
    if (!(c.budget_fraction > 0.0 && c.budget_fraction <= 1.0)) {
        throw std::invalid_argument(where + ".budget_fraction=" + std::to_string(c.budget_fraction) + " must be in (0, 1]");
    }
    return c;
}

// A per-request token array (None = none given).
std::vector<std::int32_t> tokens_array(const py::object& o, const char* field) {
    if (o.is_none()) return {};
    const auto a = o.cast<I32In>();
    if (a.ndim() != 1) throw std::invalid_argument(std::string(field) + " must be a 1-D array");
    return std::vector<std::int32_t>(a.data(), a.data() + a.shape(0));
}

std::size_t stage_index(const Simulator& sim, std::int64_t stage) {
    if (stage < 0 || static_cast<std::size_t>(stage) >= sim.num_stages()) {
        throw py::index_error("stage=" + std::to_string(stage) + " is not in [0, " + std::to_string(sim.num_stages()) + ")");
    }
    return static_cast<std::size_t>(stage);
}

}  // namespace

void register_sim(py::module_& m) {
    m.attr("MAX_JITTER_CV") = Simulator::kMaxJitterCv;
    py::class_<Simulator>(m, "Simulator", "Deterministic discrete-event simulation over StageSchedulers.")
        .def(py::init([](const py::list& stages, const Policy& policy, const F64In& arrivals_s, const F64In& slo_s,
                         const I32In& tier, double jitter_cv, std::uint64_t seed, double cold_start_s,
                         std::int64_t ring_capacity, const std::vector<double>& tier_weights, const py::object& in_tokens,
                         const py::object& out_tokens, const py::object& max_tokens) {
                 SimConfig cfg;
                 for (std::size_t i = 0; i < stages.size(); ++i) cfg.stages.push_back(parse_stage(stages[i], i));
                 cfg.policy = policy;
                 cfg.arrivals_ns = seconds_array_to_ns(arrivals_s, "arrivals_s");
                 cfg.slo_ns = seconds_array_to_ns(slo_s, "slo_s");
                 if (tier.ndim() != 1) throw std::invalid_argument("tier must be a 1-D array");
                 cfg.tier.assign(tier.data(), tier.data() + tier.shape(0));
                 cfg.jitter_cv = jitter_cv;
                 cfg.seed = seed;
                 cfg.cold_start_ns = to_ns(cold_start_s, "cold_start_s");
                 if (ring_capacity < 2) throw std::invalid_argument("ring_capacity=" + std::to_string(ring_capacity) + " must be a power of two >= 2");
                 cfg.ring_capacity = static_cast<std::size_t>(ring_capacity);
                 cfg.tier_weights = tier_weights;
                 cfg.in_tokens = tokens_array(in_tokens, "in_tokens");
                 cfg.out_tokens = tokens_array(out_tokens, "out_tokens");
                 cfg.max_tokens = tokens_array(max_tokens, "max_tokens");
                 return std::make_unique<Simulator>(std::move(cfg));
             }),
             py::kw_only(), py::arg("stages"), py::arg("policy"), py::arg("arrivals_s"), py::arg("slo_s"),
             py::arg("tier"), py::arg("jitter_cv") = 0.1, py::arg("seed") = 0, py::arg("cold_start_s") = 10.0,
             py::arg("ring_capacity") = 1024, py::arg("tier_weights") = std::vector<double>{},
             py::arg("in_tokens") = py::none(), py::arg("out_tokens") = py::none(), py::arg("max_tokens") = py::none(),
             "Build a simulation; see cpp/include/pard/simulator.hpp for the model. ValueError on bad input.")
        .def("run_until", [](Simulator& s, double t_s) {
                 const std::int64_t t = to_ns(t_s, "t_s");
                 py::gil_scoped_release release;
                 return s.run_until(t);
             }, py::arg("t_s"),
             "Process every event up to t_s (seconds, GIL released) and set the clock to t_s. "
             "Returns True while events or arrivals remain.")
        .def_property_readonly("now_s", [](const Simulator& s) { return to_s(s.now_ns()); })
        .def_property_readonly("num_stages", &Simulator::num_stages)
        .def_property_readonly("num_requests", &Simulator::num_requests)
        .def("publish", [](Simulator& s, std::int64_t stage, double downstream_s, double mu, double eps,
                           double queue_delay_s, double admit_fraction, double service_rate, double duration_scale,
                           double path_rate, double overload_downstream_s, double floor_downstream_s,
                           double outrank_downstream_s) {
                 s.publish(stage_index(s, stage),
                           PublishedTerms::from_seconds(downstream_s, mu, eps, queue_delay_s, admit_fraction,
                                                        service_rate, duration_scale, path_rate,
                                                        overload_downstream_s, floor_downstream_s,
                                                        outrank_downstream_s));
             },
             py::arg("stage"), py::kw_only(), py::arg("downstream_s"), py::arg("mu"), py::arg("eps"),
             py::arg("queue_delay_s"), py::arg("admit_fraction") = 1.0, py::arg("service_rate") = 0.0,
             py::arg("duration_scale") = 1.0, py::arg("path_rate") = 0.0, py::arg("overload_downstream_s") = 0.0,
             py::arg("floor_downstream_s") = 0.0, py::arg("outrank_downstream_s") = 0.0)
        .def("publish_all", [](Simulator& s, const std::vector<std::array<double, 11>>& terms) {
                 if (terms.size() != s.num_stages()) {
                     throw std::invalid_argument("publish_all: terms has " + std::to_string(terms.size()) +
                                                 " rows but the simulation has " + std::to_string(s.num_stages()) + " stages");
                 }
                 for (std::size_t k = 0; k < terms.size(); ++k) {
                     const auto& t = terms[k];
                     s.publish(k, PublishedTerms::from_seconds(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9],
                                                               t[10]));
                 }
             },
             py::arg("terms"),
             "publish() for every stage at once: one row (downstream_s, mu, eps, queue_delay_s, admit_fraction, "
             "service_rate, duration_scale, path_rate, overload_downstream_s, floor_downstream_s, outrank_downstream_s) per "
             "stage, in stage order.")
        .def("set_workers", [](Simulator& s, std::int64_t stage, int n) { s.set_workers(stage_index(s, stage), n); },
             py::arg("stage"), py::arg("n"),
             "Set a stage's target worker count (>= 1): new workers serve after cold_start_s; removal takes "
             "cold, then idle, then busy workers (after their collected work).")
        .def("workers", [](const Simulator& s, std::int64_t stage) { return s.workers(stage_index(s, stage)); },
             py::arg("stage"))
        .def("serving", [](const Simulator& s) {
                 std::vector<int> out(s.num_stages());
                 for (std::size_t k = 0; k < out.size(); ++k) out[k] = s.workers(k);
                 return out;
             },
             "workers(stage) of every stage, in stage order.")
        .def("queued", [](const Simulator& s, std::int64_t stage) { return s.queued(stage_index(s, stage)); },
             py::arg("stage"))
        .def("current_order", [](const Simulator& s, std::int64_t stage) {
                 return std::string(order_name(s.current_order(stage_index(s, stage))));
             }, py::arg("stage"))
        .def("take_stats", [](Simulator& s) {
            py::list out;
            StageStats st;
            for (std::size_t k = 0; k < s.num_stages(); ++k) {
                s.take_stats(k, st);
                py::dict d;
                d["arrival_s"] = ns_to_seconds(st.arrival);
                d["qdelay_t_s"] = ns_to_seconds(st.qdelay_t);
                d["qdelay_s"] = ns_to_seconds(st.qdelay);
                d["batch_start_s"] = ns_to_seconds(st.batch_start);
                d["batch_size"] = to_numpy(st.batch_size);
                d["batch_wait_s"] = ns_to_seconds(st.batch_wait);
                d["batch_duration_s"] = ns_to_seconds(st.batch_duration);
                d["dropped"] = scalar_array(st.dropped);
                d["late"] = scalar_array(st.late);
                d["queued"] = scalar_array(static_cast<std::int64_t>(s.queued(k)));
                out.append(d);
            }
            return out;
        })
        .def("outcomes", [](const Simulator& s) {
            const std::size_t n = s.num_requests();
            py::array_t<std::int8_t> state(static_cast<py::ssize_t>(n));
            py::array_t<double> finish(static_cast<py::ssize_t>(n));
            auto* ps = state.mutable_data();
            auto* pf = finish.mutable_data();
            for (std::size_t i = 0; i < n; ++i) {
                ps[i] = static_cast<std::int8_t>(s.states()[i]);
                const std::int64_t f = s.finish_ns()[i];
                pf[i] = f < 0 ? std::numeric_limits<double>::quiet_NaN() : to_s(f);
            }
            py::array_t<double> compute(static_cast<py::ssize_t>(n));
            auto* pc = compute.mutable_data();
            for (std::size_t i = 0; i < n; ++i) pc[i] = s.compute_ns()[i] * 1e-9;
            py::dict d;
            d["state"] = state;
            d["finish_s"] = finish;
            d["drop_stage"] = to_numpy(s.drop_stage());
            d["reason"] = to_numpy(s.drop_reason());
            d["compute_s"] = compute;
            return d;
        })
        .def("compute_split", [](const Simulator& s) { return split_dict(s.compute_split()); },
             "Where the compute went (pard/compute_split.hpp): {useful_s, wasted_s, unresolved_s (per stage, s), "
             "shed, shed_before_compute}.")
        .def("llm_calibration", [](const Simulator& s) {
                 py::dict d;
                 for (std::size_t k = 0; k < s.num_stages(); ++k) {
                     const llm::LlmCost* c = s.llm_cost(k);
                     if (c == nullptr) continue;
                     d[py::int_(k)] = bind::calibration_dict(*c);
                 }
                 return d;
             },
             "Per LLM stage index: {quantile, token_aware, n, under}: of the n requests that finished there, how many "
             "ended within the length predicted at their join.")
        .def("batches", [](const Simulator& s) {
            const BatchLog& b = s.batches();
            py::dict d;
            d["stage"] = to_numpy(b.stage);
            d["start_s"] = ns_to_seconds(b.start);
            d["duration_s"] = ns_to_seconds(b.duration);
            d["size"] = to_numpy(b.size);
            return d;
        });
}

}  // namespace pard::bind
