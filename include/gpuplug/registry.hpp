// SPDX-License-Identifier: Apache-2.0
// PluginRegistry: discovers vendor plugins, reports why each is (un)usable, and makes backends.
#pragma once

#include <gpuplug/config.hpp>  // first: the C++20 check, the export region

#include <gpuplug/layer.h>

#include <gpuplug/backend.hpp>
#include <gpuplug/types.hpp>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

GPUPLUG_API_BEGIN
namespace gpuplug {

enum class PluginState {
  available,    // loaded, probed, at least one device
  unavailable,  // loaded fine, but the driver or device is missing here
  failed,       // could not be used as a plugin at all
};

enum class PluginReason {
  none,
  not_a_shared_object,
  missing_dependency,
  missing_entry_symbol,
  entry_returned_null,
  abi_mismatch,
  table_too_small,
  duplicate_name,
  driver_missing,
  driver_too_old,
  no_device,
  probe_failed,
  crashed,         // the isolated probe died of a signal (the message names it: "SIGSEGV")
  exited,          // the isolated probe exited before it sent a complete record
  timed_out,       // the isolated probe did not answer in time and was killed
  untrusted_path,  // the file or a folder above it can be changed by another user
  not_a_regular_file,  // a directory, FIFO or device, or a file that cannot be opened
  load_failed,         // loading stopped with an error of the core's own (out of memory, ...)
};

std::string_view to_string(PluginState s) noexcept;
std::string_view to_string(PluginReason r) noexcept;

/// One candidate plugin file and what became of it.
struct PluginInfo {
  std::filesystem::path path;
  std::string name;      // "cuda"; from the file name (libgpuplug-<name>.so) until a table names it
  std::string vendor;
  std::string version;   // the plugin's own version string
  std::uint32_t abi_version = 0;  // negotiated; 0 when none
  PluginState state = PluginState::failed;
  PluginReason reason = PluginReason::none;
  std::string message;   // full reason, e.g. "driver missing: libcuda.so.1 not found"
  std::vector<DeviceInfo> devices;
};

/// Where discovery runs a plugin's entry, probe and describe_device.
enum class ProbeMode {
  isolated,    // in a child process (the gpuplug-probe helper): a crash or hang is contained
  in_process,  // in this process: for environments that cannot spawn processes
};

std::string_view to_string(ProbeMode m) noexcept;

/// How discover() probes. Unset fields come from the environment (GPUPLUG_PROBE=isolated|
/// inprocess, GPUPLUG_PROBE_TIMEOUT=<seconds>), else the defaults: isolated, 10 s.
struct DiscoveryOptions {
  std::optional<ProbeMode> probe_mode;
  std::optional<std::chrono::milliseconds> probe_timeout;  // per discovery, all probes together
};

/// The longest text the core copies from a plugin's last_error or ledger_report: longer texts are
/// cut there and end with a "[truncated ...]" marker. Whatever length the plugin claims.
inline constexpr std::size_t max_plugin_text_bytes = 64 * 1024;

/// A parsed selector element: "cuda:1!" is {name "cuda", ordinal 1, required true}. At most one
/// of ordinal, uuid and pci is set: each names one device of the plugin.
struct SelectorItem {
  std::string name;                      // "auto", "cuda", "hip", "host", or any plugin name
  std::optional<std::uint32_t> ordinal;  // nullopt: the first available device
  bool required = false;                 // '!': absence is an error, not a fallback
  /// "cuda:uuid=GPU-8932f937-..." names the device whose DeviceInfo::uuid is this text (compared
  /// ignoring case; a "GPU-" prefix may be left out on either side, as CUDA_VISIBLE_DEVICES
  /// allows). Letters, digits and '-' only, at most 63 of them.
  std::optional<std::string> uuid;
  /// "hip:pci=0000:c1:00.0" (or the short "c1:00.0", domain 0) names the device at that PCI
  /// address (DeviceInfo::pci), hex digits in either case, as nvidia-smi and lspci print them.
  std::optional<PciAddress> pci;
};

/// Parses "auto", "cuda", "cuda:1", "hip:0!", "cuda:uuid=GPU-...", "hip:pci=c1:00.0",
/// "cuda,hip,host". Throws Error(invalid_argument) naming the selector and the offending element
/// (empty element, bad ordinal, malformed uuid or PCI address, bad characters).
std::vector<SelectorItem> parse_selector(std::string_view selector);

/// The outcome of a selection: the backend and why earlier candidates were passed over.
/// The backend a Selection holds: a std::shared_ptr<GpuBackend> in all but one thing. `*` of a
/// temporary does not compile, so `GpuBackend& gpu = *registry.select("host").backend;`, which
/// would leave `gpu` naming a destroyed backend as soon as the Selection is gone, is a compile
/// error ("use of deleted function ... operator*() const &&"): keep the Selection, or its
/// backend, in a variable first. `->` on a temporary is fine (it lives to the end of the full
/// expression). Converts to std::shared_ptr<GpuBackend> wherever one is expected.
class BackendPtr {
 public:
  BackendPtr() noexcept = default;
  BackendPtr(std::shared_ptr<GpuBackend> backend) noexcept : p_(std::move(backend)) {}  // NOLINT

  operator std::shared_ptr<GpuBackend>() const noexcept { return p_; }  // NOLINT: converts
  GpuBackend& operator*() const& noexcept { return *p_; }
  GpuBackend& operator*() const&& = delete;  // the dangling spelling: see above
  GpuBackend* operator->() const noexcept { return p_.get(); }
  GpuBackend* get() const noexcept { return p_.get(); }
  explicit operator bool() const noexcept { return p_ != nullptr; }
  void reset() noexcept { p_.reset(); }

  friend bool operator==(const BackendPtr& a, std::nullptr_t) noexcept { return !a.p_; }
  friend bool operator==(const BackendPtr& a, const BackendPtr& b) noexcept { return a.p_ == b.p_; }
  friend bool operator==(const BackendPtr& a, const std::shared_ptr<GpuBackend>& b) noexcept {
    return a.p_ == b;
  }
  friend std::ostream& operator<<(std::ostream& os, const BackendPtr& p) { return os << p.p_; }

 private:
  std::shared_ptr<GpuBackend> p_;
};

struct Selection {
  BackendPtr backend;                     // null from PluginRegistry::dry_run
  std::string chosen;                     // "host:0"
  std::vector<std::string> passed_over;   // "cuda: driver missing: libcuda.so.1 not found"
  /// When "auto" ran (not replaced by GPUPLUG_BACKEND): every device of the usable plugins, best
  /// first, one line each with its rank, the class it ranked as, its score and its fate:
  /// "1. cuda:0 discrete_gpu, score: 989000 GFLOP/s, 143771 MiB, 132 CUs: chosen",
  /// "2. host:0 cpu, score: ...: ranked below cuda:0", or "...: refused (<why>)" when its create
  /// failed. The order: class (discrete_gpu, integrated_gpu, accelerator, cpu, emulator; a
  /// plugin older than ABI 1.1 declares none and ranks as accelerator), then score (peak_gflops,
  /// then total_memory, then compute_units, larger first), then discovery order, then ordinal.
  /// Plugins that cannot be used rank nowhere: their reasons are in passed_over.
  std::vector<std::string> ranking;
  /// One line: "chose host:0 (cuda: ...; hip: ...)"; when auto ranked, with the winner's rank:
  /// "chose cuda:0, ranked 1 of 2 (hip: ...)".
  std::string explain() const;
};

/// What a plugin says of a kernel module image for one of its devices, without loading it
/// (PluginRegistry::inspect_module; ABI 1.1 kernel preflight). Every string is as the plugin
/// wrote it, read only up to its fixed-size field: a display must escape it.
struct ModuleInspection {
  /// A published global: "gemm_f32_n_tile", with its value when it is a 4-byte global whose
  /// initial value the image holds.
  struct Symbol {
    std::string name;
    std::optional<std::uint32_t> value;
    friend bool operator==(const Symbol&, const Symbol&) = default;
  };
  bool loadable = false;
  std::string format;                  ///< "fatbin", "offload bundle", "ELF shared object", ...
  std::string target;                  ///< the target that loads: "sm_90 (SASS)", "gfx942", "x86_64"
  std::vector<std::string> targets;    ///< every target the image carries
  std::string reason;                  ///< !loadable: why none of them loads on the device
  std::vector<std::string> functions;  ///< the kernels
  std::vector<Symbol> symbols;         ///< the other published globals
  /// True when the plugin cut a list short (its last item was "...", which is left out).
  bool truncated = false;

  /// The value of symbol `name` ("gemm_f32_n_tile"), nullopt when absent or without one.
  std::optional<std::uint32_t> value_of(std::string_view name) const;
};

/// Thread-safety: all members may be called concurrently. Backends made by a registry keep
/// their plugin library loaded after the registry is gone.
/// A layer a registry can enable (PluginRegistry::layers).
struct LayerInfo {
  std::string name;                      // what `layers=` names
  std::string summary;                   // one line
  std::string origin;                    // "built-in", "the application", or the file
  std::vector<std::string> option_keys;  // the options it reads (else GPUPLUG_<KEY>)
};

class PluginRegistry {
 public:
  /// Does not search; call discover().
  PluginRegistry();
  ~PluginRegistry();
  PluginRegistry(const PluginRegistry&) = delete;
  PluginRegistry& operator=(const PluginRegistry&) = delete;

  /// The folders and files searched, in order: GPUPLUG_PLUGIN_PATH (colon-separated), then the
  /// plugin folder beside libgpuplug.so (<libdir>/gpuplug/plugins: the installed folder from an
  /// install, the build tree's plugin folder from a build tree). Only when the core cannot locate
  /// its own file does it fall back to the build tree's folder compiled into it.
  static std::vector<std::filesystem::path> search_path();

  /// (Re)scans search_path(): in folders, entries named libgpuplug-*.so; files named directly are
  /// taken whatever their name. Each is checked (a regular file, a trusted path, an ELF header for
  /// this machine) and probed: by default in a child process, all children at once, so that a
  /// plugin that crashes, exits or hangs is reported (crashed, exited, timed_out) instead of
  /// taking this process with it. An available plugin is loaded into this process only when
  /// create() first needs it. When two plugins share a name the first usable one wins; the
  /// others are duplicate_name. Never throws for a broken plugin.
  void discover(const DiscoveryOptions& options = {});
  /// Checks and probes one file (e.g. `gpuplug check --plugin FILE`); returns its entry.
  PluginInfo add_plugin_file(const std::filesystem::path& file,
                             const DiscoveryOptions& options = {});

  /// Every candidate seen, in discovery order.
  std::vector<PluginInfo> plugins() const;

  /// Makes a backend for `selector` (GPUPLUG_BACKEND overrides "auto"). Throws Error naming the
  /// selector and why each candidate was refused when nothing matches, with one status per kind
  /// of failure (see Error in types.hpp): not_found for an unknown name (with "did you mean
  /// cuda?" for a near miss), an absent device or a registry not yet discovered; unavailable for
  /// a driver that cannot be used; invalid_argument for a malformed selector or options the
  /// plugin refused ("bad option ..."). An error that GPUPLUG_BACKEND caused names the variable.
  /// A fallback is logged at info level (a warning only when a GPU that discovery found usable
  /// failed to create its backend); its reasons are in the Selection.
  std::shared_ptr<GpuBackend> create(std::string_view selector = "auto", const Options& options = {});
  /// One backend per device `selector` names, each with its own OpCache and ledger, in the
  /// order named (docs/interop.md): "cuda" is every CUDA device, "cuda,hip" every device of
  /// both, "cuda:1" one device, "auto" (or GPUPLUG_BACKEND) every device of every usable GPU
  /// plugin (not class emulator or cpu: lavapipe is neither chosen nor created by auto while host
  /// is usable), or host's when there is none. A plugin that is not usable here is skipped unless
  /// marked '!'; a device named twice gets one backend. Throws as create() does for a malformed
  /// selector, a required item that cannot be used or options a plugin refuses, and
  /// Error(not_found, "registry", "create_all") when the selector names no usable device.
  std::vector<std::shared_ptr<GpuBackend>> create_all(std::string_view selector = "auto",
                                                      const Options& options = {});
  /// As create, but also says why: what was chosen, what was passed over, and auto's ranking.
  Selection select(std::string_view selector = "auto", const Options& options = {});
  /// A dry run of select (`gpuplug list --explain`): what `selector` would choose from what
  /// discovery found, creating no backend (`backend` is null), so nothing is loaded or
  /// initialised. A candidate whose create would fail still shows as chosen; the errors are
  /// select's, except that no option is checked (no plugin sees them).
  Selection dry_run(std::string_view selector = "auto") const;

  /// Kernel preflight: which of `image`'s targets would load on device `ordinal` of plugin
  /// `plugin` ("cuda"), and the kernels and globals it defines, without loading it or creating a
  /// backend. A target that does not fit the device is not an error: loadable is false and
  /// reason says why. Throws Error (operation "inspect_module", backend "<plugin>:<ordinal>"):
  /// not_found for a plugin that discovery did not find or an ordinal it has no device for;
  /// unavailable for a plugin that cannot be used here (its reason: "driver missing: ...");
  /// unsupported for a plugin without the slot (built against ABI 1.0); invalid_image with the
  /// plugin's reason for an image it cannot parse (truncated, garbage, empty).
  ModuleInspection inspect_module(std::string_view plugin, std::uint32_t ordinal,
                                  std::span<const std::byte> image) const;

  // ---- layers (docs/layers.md): tables stacked between the core and a plugin, enabled per
  // backend by the option `layers=a,b` (or GPUPLUG_LAYERS), first named on top.
  /// Makes `layer` available by its name to the backends this registry creates from now on. The
  /// layer's strings and tables must outlive every such backend. Throws Error(invalid_argument,
  /// "layer <name>", "add_layer", why) for a layer that breaks layer.h or a name already taken.
  void add_layer(const gpuplug_layer_v1& layer);
  /// Checks `file` as discovery checks a plugin file, loads it and adds the layer its
  /// gpuplug_layer_entry returns; the library stays loaded while a backend uses the layer.
  /// Returns the layer's name. Throws Error(unavailable, <file>, "add_layer_file", why) when the
  /// file cannot be loaded, Error(invalid_argument, ...) when it holds no usable layer.
  std::string add_layer_file(const std::filesystem::path& file);
  /// The layers `layers=` can name: the built-in ones, then those added, in order.
  std::vector<LayerInfo> layers() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuplug
GPUPLUG_API_END
