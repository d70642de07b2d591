// SPDX-License-Identifier: Apache-2.0
// gpuplug.PluginRegistry: discovery, list() as data, create / create_all / select / dry_run.
#include "common.hpp"

#include <pybind11/stl.h>

#include <chrono>
#include <optional>

namespace gpuplug::python {

namespace {

py::dict device_dict(const DeviceInfo& d) {
  py::dict out;
  out["ordinal"] = d.ordinal;
  out["name"] = d.name;
  out["uuid"] = d.uuid;
  out["arch"] = d.arch;
  out["total_memory"] = d.total_memory;
  out["free_memory"] = d.free_memory;
  out["compute_units"] = d.compute_units;
  out["managed_memory"] = d.managed_memory;
  out["concurrent_managed_access"] = d.concurrent_managed_access;
  out["pci"] = d.pci ? py::object(py::str(to_string(*d.pci))) : py::object(py::none());
  out["warp_size"] = d.warp_size;
  out["max_shared_memory_per_block"] = d.max_shared_memory_per_block;
  out["driver_version"] = d.driver_version;
  out["runtime_version"] = d.runtime_version;
  out["device_class"] = to_string(d.device_class);
  out["peak_gflops"] = d.peak_gflops;
  return out;
}

py::dict plugin_dict(const PluginInfo& p) {
  py::dict out;
  out["name"] = p.name;
  out["path"] = p.path.string();
  out["vendor"] = p.vendor;
  out["version"] = p.version;
  out["abi_version"] = p.abi_version;
  out["state"] = std::string(to_string(p.state));
  out["reason"] = std::string(to_string(p.reason));
  out["message"] = p.message;
  py::list devices;
  for (const auto& d : p.devices) devices.append(device_dict(d));
  out["devices"] = devices;
  return out;
}

Options options_of(const std::optional<Options>& options) { return options.value_or(Options{}); }

py::dict selection_dict(Selection s) {
  py::dict out;
  out["backend"] = s.backend ? py::cast(Backend(std::shared_ptr<GpuBackend>(s.backend)))
                             : py::object(py::none());
  out["chosen"] = s.chosen;
  out["passed_over"] = s.passed_over;
  out["ranking"] = s.ranking;
  out["explain"] = s.explain();
  return out;
}

}  // namespace

py::dict device_info_dict(const DeviceInfo& d) { return device_dict(d); }

void bind_registry(py::module_& m) {
  py::class_<PluginRegistry>(m, "PluginRegistry",
                             "Finds the plugins (discover) and makes backends (create).")
      .def(py::init<>())
      .def_static("search_path", [] {
        std::vector<std::string> out;
        for (const auto& p : PluginRegistry::search_path()) out.push_back(p.string());
        return out;
      }, "The folders and files discover() searches, in order.")
      .def("discover",
           [](PluginRegistry& r, std::optional<std::string> probe, std::optional<double> timeout) {
             DiscoveryOptions o;
             if (probe) {
               if (*probe == "isolated") o.probe_mode = ProbeMode::isolated;
               else if (*probe == "inprocess" || *probe == "in_process") o.probe_mode = ProbeMode::in_process;
               else refuse("registry", "discover", "probe must be 'isolated' or 'inprocess', not '" + *probe + "'");
             }
             if (timeout) {
               if (!(*timeout > 0)) refuse("registry", "discover", "timeout must be > 0 seconds");
               o.probe_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(*timeout * 1000));
             }
             py::gil_scoped_release unlocked;
             r.discover(o);
           },
           py::arg("probe") = py::none(), py::arg("timeout") = py::none(),
           "(Re)scans the search path; probe 'isolated' (default) or 'inprocess', timeout in s.")
      .def("list", [](const PluginRegistry& r) {
        py::list out;
        for (const auto& p : r.plugins()) out.append(plugin_dict(p));
        return out;
      }, "Every plugin seen, in discovery order, as dicts (name, state, reason, message, devices, ...).")
      .def("create",
           [](PluginRegistry& r, const std::string& selector, std::optional<Options> options) {
             std::shared_ptr<GpuBackend> b;
             {
               py::gil_scoped_release unlocked;
               b = r.create(selector, options_of(options));
             }
             return Backend(std::move(b));
           },
           py::arg("selector") = "auto", py::arg("options") = py::none(),
           "A backend for selector ('auto', 'host!', 'cuda:1'); options: dict of str to str.")
      .def("create_all",
           [](PluginRegistry& r, const std::string& selector, std::optional<Options> options) {
             std::vector<std::shared_ptr<GpuBackend>> all;
             {
               py::gil_scoped_release unlocked;
               all = r.create_all(selector, options_of(options));
             }
             std::vector<Backend> out;
             for (auto& b : all) out.emplace_back(std::move(b));
             return out;
           },
           py::arg("selector") = "auto", py::arg("options") = py::none(),
           "One backend per device the selector names.")
      .def("select",
           [](PluginRegistry& r, const std::string& selector, std::optional<Options> options) {
             Selection s;
             {
               py::gil_scoped_release unlocked;
               s = r.select(selector, options_of(options));
             }
             return selection_dict(std::move(s));
           },
           py::arg("selector") = "auto", py::arg("options") = py::none(),
           "As create, with why: dict of backend, chosen, passed_over, ranking, explain.")
      .def("dry_run",
           [](const PluginRegistry& r, const std::string& selector) {
             return selection_dict(r.dry_run(selector));
           },
           py::arg("selector") = "auto",
           "What select would choose, creating nothing (backend is None).");
}

}  // namespace gpuplug::python
