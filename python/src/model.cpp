// SPDX-License-Identifier: Apache-2.0
// gpuplug.OpCache (the backend's own, a standalone or a model cache; its scratch handed out as
// Buffers the cache owns) and gpuplug.Teardown (OpCaches and Python resources released in
// reverse order, past failures), with gpuplug.TeardownError.
#include "common.hpp"

#include <gpuplug/op_cache.hpp>
#include <gpuplug/teardown.hpp>

#include <pybind11/stl.h>

#include <map>
#include <sstream>
#include <unordered_map>

namespace gpuplug::python {

namespace {

PyObject* teardown_error_type = nullptr;  // never released, as gpuplug.Error

/// An OpCache as Python holds it. Every call takes `calls_` shared and release/rearm take it
/// unique, so the C++ rule "release needs exclusive use" holds whatever Python threads do; it is
/// only ever taken with the GIL let go. A scratch buffer is handed out as a Buffer whose owner
/// is the cache: gpu.free refuses it, and release() first marks each such Buffer freed (waiting
/// for copies in flight), so that no Python object reaches memory the cache gave back.
class CacheObject final : public ModelResource<GpuBackend>, public std::enable_shared_from_this<CacheObject> {
 public:
  CacheObject() : owned_(std::make_unique<OpCache>()), cache_(owned_.get()) {}
  CacheObject(const std::shared_ptr<GpuBackend>& gpu, const std::string& name)
      : bound_(gpu), owned_(std::make_unique<OpCache>(*gpu, name)), cache_(owned_.get()) {}
  CacheObject(const std::shared_ptr<GpuBackend>& gpu, OpCache& own) : bound_(gpu), cache_(&own), own_(true) {}

  /// A standalone or model cache that still holds scratch gives it back through the backend it
  /// serves (Python frees on the last reference); the backend's own cache is the backend's.
  ~CacheObject() override {
    if (own_ || !bound_ || cache_->scratch_count() == 0) return;
    try {
      release(*bound_);
    } catch (...) {  // a destructor cannot fail; the OpCache's own destructor warns of what is left
    }
  }

  OpCache& cache() noexcept { return *cache_; }
  std::string_view label() const override { return cache_->label(); }
  bool own() const noexcept { return own_; }

  /// Runs f() with the GIL let go and `calls_` shared, after noting the backend the call binds.
  template <class F>
  auto call(const std::shared_ptr<GpuBackend>& gpu, F&& f) {
    py::gil_scoped_release unlocked;
    const std::shared_lock lock(calls_);
    if (gpu) {
      const std::lock_guard state(state_);
      if (!bound_) bound_ = gpu;  // the C++ cache binds on the first call that passes a backend
    }
    return f();
  }

  BufferPtr scratch(const std::shared_ptr<GpuBackend>& gpu, const std::string& tag, std::size_t nbytes) {
    return call(gpu, [&] {
      const DevicePtr p = cache_->scratch(*gpu, tag, nbytes);
      const std::lock_guard state(state_);
      std::weak_ptr<BufferState>& slot = scratch_[p.value];
      if (auto held = slot.lock(); held && held->nbytes >= nbytes) return held;
      for (auto it = scratch_.begin(); it != scratch_.end();) {
        it = it->second.expired() && &it->second != &slot ? scratch_.erase(it) : std::next(it);
      }
      auto buf = std::make_shared<BufferState>(gpu, p, nbytes, false);
      buf->owner = std::string(cache_->label());
      buf->keep = shared_from_this();
      slot = buf;
      return buf;
    });
  }

  /// Teardown and OpCache.release. Refuses (changing nothing) what the C++ cache would refuse and
  /// scratch with DLPack exports in use; else marks the scratch Buffers freed, then releases.
  void release(GpuBackend& gpu) override {
    const std::unique_lock lock(calls_);
    const std::string name(gpu.name());
    std::vector<BufferPtr> handed_out;
    {
      const std::lock_guard state(state_);
      if (bound_ && bound_.get() != &gpu && !own_) {
        refuse(name, "release", std::string(cache_->label()) + " serves " + std::string(bound_->name()));
      }
      for (const auto& [ptr, weak] : scratch_) {
        if (auto buf = weak.lock()) handed_out.push_back(std::move(buf));
      }
    }
    if (!cache_->is_model_cache() && cache_->model_cache_count() > 0) {
      refuse(name, "release", std::string(cache_->label()) + " is shared by " +
                                  std::to_string(cache_->model_cache_count()) +
                                  " model cache(s): release those instead");
    }
    for (const auto& buf : handed_out) {
      if (const auto n = buf->exports.load(); n > 0) {
        refuse(name, "release", std::string(cache_->label()) + ": a scratch buffer of " +
                                    std::to_string(buf->nbytes) + " bytes has " + std::to_string(n) +
                                    " DLPack export(s) in use: delete them first");
      }
    }
    for (const auto& buf : handed_out) buf->owner_released();
    const std::lock_guard state(state_);
    scratch_.clear();
    cache_->release(gpu);
    if (!own_ && !cache_->is_model_cache()) bound_.reset();  // release unbinds such a cache
  }

  void rearm() {
    py::gil_scoped_release unlocked;
    const std::unique_lock lock(calls_);
    cache_->rearm();
  }

 private:
  // First, so that it goes last: a model cache is destroyed while its backend still lives.
  std::shared_ptr<GpuBackend> bound_;  // the backend the cache serves, kept alive for release
  std::unique_ptr<OpCache> owned_;  // null for the backend's own
  OpCache* cache_;
  bool own_ = false;
  std::shared_mutex calls_;
  std::mutex state_;  // bound_, scratch_
  std::unordered_map<std::uint64_t, std::weak_ptr<BufferState>> scratch_;  // by address
};

using CachePtr = std::shared_ptr<CacheObject>;

/// One wrapper per backend's own cache, so that every Buffer of its scratch is seen by whichever
/// OpCache object releases it. Never destroyed (no destructor at exit).
CachePtr own_cache(const std::shared_ptr<GpuBackend>& gpu) {
  static std::mutex mutex;
  static auto* table = new std::map<const GpuBackend*, std::weak_ptr<CacheObject>>();
  const std::lock_guard lock(mutex);
  for (auto it = table->begin(); it != table->end();) it = it->second.expired() ? table->erase(it) : std::next(it);
  std::weak_ptr<CacheObject>& slot = (*table)[gpu.get()];
  if (auto held = slot.lock()) return held;
  auto made = std::make_shared<CacheObject>(gpu, gpu->op_cache());
  slot = made;
  return made;
}

py::list scratch_list(const std::vector<ScratchMemory>& rows) {
  py::list out;
  for (const auto& r : rows) {
    py::dict d;
    d["cache"] = r.cache;
    d["tag"] = r.tag;
    d["live_bytes"] = r.live_bytes;
    d["retired_bytes"] = r.retired_bytes;
    d["retired_count"] = r.retired_count;
    out.append(std::move(d));
  }
  return out;
}

/// A Python object with release(gpu) (and, optionally, a label) as a ModelResource.
class PyResource final : public ModelResource<GpuBackend> {
 public:
  PyResource(py::object obj, std::string label, const py::object* gpu)
      : obj_(std::move(obj)), label_(std::move(label)), gpu_(gpu) {}
  ~PyResource() override {
    const py::gil_scoped_acquire gil;
    obj_ = py::object();
  }
  std::string_view label() const override { return label_; }
  void release(GpuBackend&) override {
    const py::gil_scoped_acquire gil;
    try {
      obj_.attr("release")(*gpu_);
    } catch (py::error_already_set& e) {
      if (e.matches(error_class())) {  // a gpuplug.Error keeps its status and operation
        const py::object v = e.value();
        throw Error(status_named(py::str(v.attr("status"))), py::str(v.attr("backend")),
                    py::str(v.attr("operation")), py::str(v.attr("message")));
      }
      throw std::runtime_error(e.what());
    }
  }

 private:
  py::object obj_;
  std::string label_;
  const py::object* gpu_;  // the Python GpuBackend release_all was given
};

/// A Teardown as Python holds it: the resources (kept alive by it) in the order added.
struct TeardownObject {
  Teardown teardown;
  std::vector<CachePtr> caches;
  std::vector<std::unique_ptr<PyResource>> resources;
  py::object gpu;  // during release_all only
  bool releasing = false;  // guarded by the GIL
};

std::string label_of(const py::object& obj) {
  if (py::hasattr(obj, "label")) {
    py::object label = obj.attr("label");
    if (PyCallable_Check(label.ptr())) label = label();
    if (!py::isinstance<py::str>(label)) {
      refuse("", "Teardown.add", "the label of " + std::string(py::str(py::type::handle_of(obj).attr("__name__"))) +
                                     " is not a str");
    }
    return label.cast<std::string>();
  }
  return py::str(py::type::handle_of(obj).attr("__name__"));
}

}  // namespace

void bind_model(py::module_& m, py::class_<Backend>& backend) {
  py::class_<CacheObject, CachePtr>(m, "OpCache",
      "A backend's memo of kernel handles, grow-only scratch, latches, once-sets and first-N gates\n"
      "(docs/opcache.md). OpCache() is a standalone cache; OpCache(gpu, name) a model cache on gpu;\n"
      "gpu.op_cache() the backend's own.")
      .def(py::init([](py::object gpu, const std::string& name) {
        if (gpu.is_none()) {
          if (!name.empty()) refuse("", "OpCache", "a name is for a model cache: pass its backend too");
          return std::make_shared<CacheObject>();
        }
        auto backend_ptr = gpu.cast<Backend&>().get("OpCache");
        py::gil_scoped_release unlocked;
        return std::make_shared<CacheObject>(backend_ptr, name);
      }), py::arg("gpu") = py::none(), py::arg("name") = "")
      .def("kernel", [](CacheObject& c, Backend& b, const std::string& module, const std::string& func) {
        auto gpu = b.get("kernel");
        auto k = std::make_shared<KernelObject>();
        k->backend = gpu;
        k->handle = c.call(gpu, [&] { return c.cache().kernel(*gpu, module, func); });
        k->module = module;
        k->function = func;
        return k;
      }, py::arg("gpu"), py::arg("module"), py::arg("func"), "Memoized gpu.kernel(module, func).")
      .def("scratch", [](CacheObject& c, Backend& b, const std::string& tag, std::size_t nbytes) {
        return c.scratch(b.get("scratch"), tag, nbytes);
      }, py::arg("gpu"), py::arg("tag"), py::arg("nbytes"),
      "The grow-only buffer of tag, at least nbytes: a Buffer the cache owns (valid until release).")
      .def("alloc_with_fallback", [](CacheObject& c, Backend& b, std::size_t nbytes, py::object site) {
        auto gpu = b.get("alloc_with_fallback");
        const char* s = caller_site(site);
        const DevicePtr p = c.call(gpu, [&] { return c.cache().alloc_with_fallback(*gpu, nbytes, s); });
        return std::make_shared<BufferState>(gpu, p, nbytes, false);
      }, py::arg("gpu"), py::arg("nbytes"), py::arg("site") = py::none(),
      "Device memory, managed memory once device memory ran out (latched); the caller's Buffer.")
      .def_property_readonly("alloc_fell_back", [](CacheObject& c) {
        return c.call(nullptr, [&] { return c.cache().alloc_fell_back(); });
      })
      .def("note_alloc_fallback", [](CacheObject& c) { c.call(nullptr, [&] { c.cache().note_alloc_fallback(); }); })
      .def("first_n", [](CacheObject& c, const std::string& key, std::uint64_t n) {
        return c.call(nullptr, [&] { return c.cache().first_n(key, n); });
      }, py::arg("key"), py::arg("n"), "True for exactly the first n calls with key.")
      .def("once", [](CacheObject& c, const std::string& key) {
        return c.call(nullptr, [&] { return c.cache().once(key); });
      }, py::arg("key"))
      .def("first_shape", [](CacheObject& c, const std::string& name, std::uint64_t mm, std::uint64_t n, std::uint64_t k) {
        return c.call(nullptr, [&] { return c.cache().first_shape(name, mm, n, k); });
      }, py::arg("name"), py::arg("m"), py::arg("n"), py::arg("k"))
      .def("record_n_tile", [](CacheObject& c, const KernelObject& k, std::uint32_t n) {
        c.call(nullptr, [&] { c.cache().record_n_tile(k.handle, n); });
      }, py::arg("kernel"), py::arg("n"))
      .def("n_tile", [](CacheObject& c, const KernelObject& k) {
        return c.call(nullptr, [&] { return c.cache().n_tile(k.handle); });
      }, py::arg("kernel"), "The recorded N tile of kernel, or None.")
      .def("record_a_e4m3", [](CacheObject& c, const KernelObject& k) {
        c.call(nullptr, [&] { c.cache().record_a_e4m3(k.handle); });
      }, py::arg("kernel"))
      .def("a_e4m3", [](CacheObject& c, const KernelObject& k) {
        return c.call(nullptr, [&] { return c.cache().a_e4m3(k.handle); });
      }, py::arg("kernel"))
      .def_property_readonly("kernel_count", [](CacheObject& c) { return c.cache().kernel_count(); })
      .def_property_readonly("scratch_count", [](CacheObject& c) { return c.cache().scratch_count(); })
      .def_property_readonly("is_model_cache", [](CacheObject& c) { return c.cache().is_model_cache(); })
      .def_property_readonly("model_cache_count", [](CacheObject& c) { return c.cache().model_cache_count(); })
      .def_property_readonly("label", [](const CacheObject& c) { return std::string(c.label()); })
      .def("scratch_memory", [](CacheObject& c) { return scratch_list(c.call(nullptr, [&] { return c.cache().scratch_memory(); })); },
           "What each scratch tag holds, live and retired, most first (a list of dicts).")
      .def("all_scratch_memory", [](CacheObject& c) {
        return scratch_list(c.call(nullptr, [&] { return c.cache().all_scratch_memory(); }));
      }, "The same for this cache and every cache sharing its kernel memo.")
      .def("release", [](CacheObject& c, Backend& b) {
        auto gpu = b.get("release");
        py::gil_scoped_release unlocked;
        c.release(*gpu);
      }, py::arg("gpu"), "Frees every scratch buffer (its Buffers become freed); idempotent.")
      .def("rearm", &CacheObject::rearm, "A released model cache may allocate again.")
      .def("__repr__", [](CacheObject& c) {
        std::ostringstream os;
        os << c.cache();
        return "<gpuplug." + os.str() + (c.label() == "op scratch" ? "" : " " + std::string(c.label())) + ">";
      });

  backend.def("op_cache", [](Backend& b) { return own_cache(b.get("op_cache")); },
              "The backend's own OpCache (the same object while it is referenced).");

  teardown_error_type = PyErr_NewExceptionWithDoc(
      "gpuplug.TeardownError",
      "What Teardown.release_all raises when resources failed to release: a gpuplug.Error whose\n"
      "failures lists each one, in release order, as a dict (label, status, operation, message).",
      error_class(), nullptr);
  if (teardown_error_type == nullptr) throw py::error_already_set();
  py::handle(teardown_error_type).attr("failures") = py::list();
  m.add_object("TeardownError", py::reinterpret_borrow<py::object>(teardown_error_type));
  py::register_exception_translator([](std::exception_ptr p) {  // tried before gpuplug.Error's
    try {
      if (p) std::rethrow_exception(p);
    } catch (const TeardownError& e) {
      py::object value = error_value(teardown_error_type, e);
      py::list failures;
      for (const auto& f : e.failures()) {
        py::dict d;
        d["label"] = f.label;
        d["status"] = to_string(f.status);
        d["operation"] = f.operation;
        d["message"] = f.message;
        failures.append(std::move(d));
      }
      value.attr("failures") = failures;
      PyErr_SetObject(teardown_error_type, value.ptr());
    }
  });

  py::class_<TeardownObject>(m, "Teardown",
      "An ordered list of a model's resources released together: release_all(gpu) releases them in\n"
      "reverse order of adding, past failures, then raises one TeardownError naming each failure.\n"
      "A resource is an OpCache or any object with release(gpu) (and optionally a label).")
      .def(py::init<>())
      .def("add", [](TeardownObject& t, py::object resource) {
        if (t.releasing) refuse("", "Teardown.add", "release_all is running");
        if (py::isinstance<CacheObject>(resource)) {
          auto cache = resource.cast<CachePtr>();
          t.teardown.add(*cache);
          t.caches.push_back(std::move(cache));
          return resource;
        }
        if (!py::hasattr(resource, "release") || !PyCallable_Check(resource.attr("release").ptr())) {
          refuse("", "Teardown.add", std::string(py::str(py::type::handle_of(resource).attr("__name__"))) +
                                         " has no release(gpu) method");
        }
        auto r = std::make_unique<PyResource>(resource, label_of(resource), &t.gpu);
        t.teardown.add(*r);
        t.resources.push_back(std::move(r));
        return resource;
      }, py::arg("resource"), "Adds a resource (returned, so `cache = td.add(OpCache(gpu, 'm'))`).")
      .def("__len__", [](const TeardownObject& t) { return t.teardown.size(); })
      .def("release_all", [](TeardownObject& t, py::object gpu) {
        if (t.releasing) refuse("", "release_all", "release_all is running already");
        auto backend_ptr = gpu.cast<Backend&>().get("release_all");
        t.gpu = gpu;
        t.releasing = true;
        try {
          py::gil_scoped_release unlocked;
          t.teardown.release_all(*backend_ptr);
        } catch (...) {
          t.releasing = false;
          t.gpu = py::object();
          throw;
        }
        t.releasing = false;
        t.gpu = py::object();
      }, py::arg("gpu"), "Releases every resource in reverse order; retried by a second call.");
}

}  // namespace gpuplug::python
