// Bindings for the planner (sync_planner.hpp): SyncPlanner, built and driven by python/pard/planner.py
// for the live runtime and Ray (update_s) and handed to Simulator.sync by the simulator; window_for_cv.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "planner_handle.hpp"
#include "register.hpp"

namespace py = pybind11;

namespace pard::bind {
namespace {

py::list terms_list(const std::vector<SyncTerms>& terms) {
    py::list out;
    for (const SyncTerms& t : terms) {
        out.append(py::make_tuple(t.downstream_s, t.mu, t.eps, t.queue_delay_s, t.admit_fraction, t.service_rate,
                                  t.duration_scale, t.in_rate, t.path_rate, t.demand_rate, t.overload_downstream_s,
                                  t.floor_downstream_s, t.outrank_downstream_s, t.batch_size, t.wait_quantile_s));
    }
    return out;
}

template <class Parse>
py::list update(PySyncPlanner& p, double now_s, const py::list& stats, const std::vector<int>& workers, Parse parse) {
    std::vector<decltype(parse(std::declval<py::dict>()))> st;
    st.reserve(stats.size());
    for (const auto& d : stats) st.push_back(parse(d.cast<py::dict>()));
    {
        py::gil_scoped_release release;
        p.core->update(now_s, st, workers);
    }
    return terms_list(p.core->terms());
}

}  // namespace

void register_planner(py::module_& m) {
    m.def("window_for_cv", &window_for_cv, py::arg("cv"),
          "The estimation window (s) for the entry stages' input burstiness cv (DESIGN 3.5).");

    py::class_<PySyncPlanner>(m, "SyncPlanner",
        "PARD's planner (sync_planner.hpp), built by pard.planner.Planner from its stages and policy. Private.")
        .def(py::init([](std::vector<std::vector<std::vector<int>>> paths, std::vector<std::vector<int>> parallel,
                         std::vector<std::vector<int>> below, std::vector<bool> entry, std::vector<double> max_batch,
                         std::vector<double> full_d, std::vector<std::vector<double>> d_table,
                         std::vector<std::vector<double>> pts_b, std::vector<std::vector<double>> pts_d,
                         std::vector<int> drawn, const std::string& mode, bool instant, bool correct_durations,
                         bool mu_at_capacity, bool adapt_window, double lam, double window_s,
                         std::int64_t samples, double cv_history_s, std::int64_t min_cv_intervals,
                         std::vector<double> constants, py::object generator, bool idle_batch, double half_life_s,
                         double prior_batches, std::vector<std::vector<int>> pace_below,
                         bool overload_upper, bool mu_at_capacity_entry, std::vector<bool> live_queue,
                         std::vector<std::vector<int>> demand_below) {
                 SyncPlannerConfig c;
                 c.paths = std::move(paths);
                 c.parallel = std::move(parallel);
                 c.below = std::move(below);
                 c.pace_below = std::move(pace_below);
                 c.demand_below = std::move(demand_below);
                 c.entry = std::move(entry);
                 c.live_queue = std::move(live_queue);
                 c.max_batch = std::move(max_batch);
                 c.full_d = std::move(full_d);
                 c.d_table = std::move(d_table);
                 c.pts_b = std::move(pts_b);
                 c.pts_d = std::move(pts_d);
                 c.drawn = std::move(drawn);
                 c.mode = downstream_mode_of(mode);
                 c.instant = instant;
                 c.correct_durations = correct_durations;
                 c.mu_at_capacity = mu_at_capacity;
                 c.mu_at_capacity_entry = mu_at_capacity_entry;
                 c.adapt_window = adapt_window;
                 c.lam = lam;
                 c.window_s = window_s;
                 c.samples = samples;
                 c.cv_history_s = cv_history_s;
                 c.min_cv_intervals = min_cv_intervals;
                 if (constants.size() != 3) {
                     throw std::invalid_argument("SyncPlanner: constants must be (scale_min, scale_max, precollected_wait)");
                 }
                 c.scale_min = constants[0];
                 c.scale_max = constants[1];
                 c.precollected_wait = constants[2];
                 c.idle_batch = idle_batch;
                 c.half_life_s = half_life_s;
                 c.prior_batches = prior_batches;
                 c.overload_upper = overload_upper;
                 auto out = std::make_unique<PySyncPlanner>();
                 const npo::BitSource bits = bits_of(generator);
                 out->generator = std::move(generator);
                 out->core = std::make_unique<SyncPlanner>(std::move(c), bits);
                 return out;
             }),
             py::arg("paths"), py::arg("parallel"), py::arg("below"), py::arg("entry"), py::arg("max_batch"),
             py::arg("full_d"), py::arg("d_table"), py::arg("pts_b"), py::arg("pts_d"), py::arg("drawn"),
             py::arg("mode"), py::arg("instant"), py::arg("correct_durations"),
             py::arg("mu_at_capacity"), py::arg("adapt_window"), py::arg("lam"), py::arg("window_s"),
             py::arg("samples"), py::arg("cv_history_s"), py::arg("min_cv_intervals"), py::arg("constants"),
             py::arg("generator"), py::arg("idle_batch"), py::arg("half_life_s"), py::arg("prior_batches"),
             py::arg("pace_below"), py::arg("overload_upper"), py::arg("mu_at_capacity_entry"),
             py::arg("live_queue") = std::vector<bool>{}, py::arg("demand_below") = std::vector<std::vector<int>>{})
        .def("update_ns", [](PySyncPlanner& p, double now_s, const py::list& stats, const std::vector<int>& workers) {
                 return update(p, now_s, stats, workers, stats_from_ns);
             },
             py::arg("now_s"), py::arg("stats"), py::arg("workers"),
             "One sync on statistics given as int64 ns arrays (keys arrival, qdelay, batch_size, batch_wait, "
             "batch_duration). Returns per stage (downstream_s, mu, eps, queue_delay_s, admit_fraction, "
             "service_rate, duration_scale, in_rate, path_rate, demand_rate, overload_downstream_s, "
             "floor_downstream_s, outrank_downstream_s, batch_size, wait_quantile_s).")
        .def("update_s", [](PySyncPlanner& p, double now_s, const py::list& stats, const std::vector<int>& workers) {
                 return update(p, now_s, stats, workers, planner_stats_from_seconds);
             },
             py::arg("now_s"), py::arg("stats"), py::arg("workers"),
             "update_ns on statistics given as float-second arrays (keys arrival_s, qdelay_s, batch_size, "
             "batch_wait_s, batch_duration_s), as the live runtime and Ray take them.")
        .def("copy", [](const PySyncPlanner& p, py::object generator) {
                 auto out = std::make_unique<PySyncPlanner>();
                 out->core = std::make_unique<SyncPlanner>(*p.core);
                 out->core->rebind(bits_of(generator));
                 out->generator = std::move(generator);
                 return out;
             },
             py::arg("generator"), "A copy of this planner's state that draws from `generator` instead.")
        .def("terms", [](const PySyncPlanner& p) { return terms_list(p.core->terms()); },
             "The last update's terms, as update_ns returns them ([] before the first).")
        .def("start", [](PySyncPlanner& p, double now_s) { p.core->start(now_s); }, py::arg("now_s"))
        .def("batch_counts", [](const PySyncPlanner& p) { return p.core->batch_counts(); },
             "Batches seen per stage by the duration correction (correct_durations; zeros otherwise).")
        .def_property_readonly("lam", [](const PySyncPlanner& p) { return p.core->lam(); })
        .def_property_readonly("window_s", [](const PySyncPlanner& p) { return p.core->window_s(); });
}

}  // namespace pard::bind
