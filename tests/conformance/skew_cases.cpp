// SPDX-License-Identifier: Apache-2.0
// Conformance cases for ABI skew: the plugin's answers to hosts of other versions, and the core
// with tables truncated at each slot boundary, padded with garbage, or larger than it knows.
// Every failure cites the compatibility rule of docs/architecture.md it breaks ("breaks ABI-3:").

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <gpuplug/support/abi_slots.hpp>
#include <gpuplug/table_backend.hpp>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "helpers.hpp"

namespace gpuplug::conformance::detail {

namespace {

using Table = gpuplug_plugin_v1;

constexpr std::uint32_t version(std::uint32_t major, std::uint32_t minor) {
  return GPUPLUG_MAKE_VERSION(major, minor);
}

std::string version_text(std::uint32_t v) {
  return std::to_string(GPUPLUG_ABI_MAJOR(v)) + "." + std::to_string(GPUPLUG_ABI_MINOR(v));
}

/// The size of the table of ABI 1.<minor>, as far as this suite knows (0: a later minor).
std::size_t table_size_of_minor(std::uint32_t minor) {
  return minor <= abi::known_minor ? abi::table_size_of_minor(minor) : 0;
}

// ---- trap slots ---------------------------------------------------------------------------------
// The bytes past a table's struct_size are filled with "trap" functions that record that they
// were called and fail: the core must never read them (ABI-3), let alone call them. A C slot has
// no user pointer, so the record is one process-wide atomic: the offset of the slot that was
// called (-1: none). Test instrumentation only, written by a call that must never happen and
// read and reset by the case on its own thread; cases of one run do not overlap.
std::atomic<std::ptrdiff_t> trapped_offset{-1};

template <auto Member>
std::ptrdiff_t offset_of() {
  static const Table probe{};
  return reinterpret_cast<const char*>(&(probe.*Member)) - reinterpret_cast<const char*>(&probe);
}

template <auto Member, class F = std::remove_cvref_t<decltype(std::declval<Table&>().*Member)>>
struct Trap;
template <auto Member, class R, class... A>
struct Trap<Member, R (*)(A...)> {
  static R call(A...) {
    trapped_offset.store(offset_of<Member>());
    return static_cast<R>(GPUPLUG_STATUS_INTERNAL);
  }
};

struct Slot {
  const char* name;
  std::size_t offset;
  std::size_t end;  // offset + the slot's size: a table whose struct_size reaches this covers it
  void (*set_trap)(Table&);
};

template <auto Member>
Slot slot(const char* name) {
  const auto offset = static_cast<std::size_t>(offset_of<Member>());
  return Slot{name, offset, offset + sizeof(std::declval<Table&>().*Member),
              [](Table& t) { t.*Member = &Trap<Member>::call; }};
}
#define GPUPLUG_SKEW_SLOT(P, name, minor, side, group, rule, absent) slot<&Table::name>(#name),

/// Every slot of the table this suite was built with, in order (the one slot list).
const std::vector<Slot>& slots() {
  static const std::vector<Slot> all{GPUPLUG_ABI_SLOTS(GPUPLUG_SKEW_SLOT, ~)};
  return all;
}
#undef GPUPLUG_SKEW_SLOT

std::string slot_at(std::ptrdiff_t offset) {
  for (const Slot& s : slots()) {
    if (static_cast<std::ptrdiff_t>(s.offset) == offset) return s.name;
  }
  return "at offset " + std::to_string(offset);
}

/// A table as a host of this suite's version sees a plugin's: the first `published_size` bytes
/// of `published` (never more: the plugin's object may end there), then traps in every slot
/// that starts at or after `published_size`, and struct_size set to `declared_size`.
Table trapped_copy(const Table& published, std::size_t published_size,
                   std::uint32_t declared_size) {
  Table t{};
  std::memcpy(&t, &published, std::min(published_size, sizeof t));
  for (const Slot& s : slots()) {
    if (s.offset >= published_size) s.set_trap(t);
  }
  t.struct_size = declared_size;
  return t;
}

/// The bytes of the published table this suite may read (ABI-3 binds the suite too).
std::size_t readable(const Table& t) { return std::min<std::size_t>(t.struct_size, sizeof(Table)); }

/// The answer of `plugin` to a host of `host_version`, which must not be null (ABI-4).
const Table& answer(const RawPlugin& plugin, std::uint32_t host_version) {
  const Table* t = plugin.entry(host_version);
  GPUPLUG_CHECK_MSG(t != nullptr, "breaks ABI-4: " GPUPLUG_PLUGIN_ENTRY_SYMBOL "("
                                      << version_text(host_version)
                                      << ") returned null, but the plugin speaks ABI 1");
  return *t;
}

/// A module file of the plugin's kernel folder whose stem is `module` (any extension).
std::filesystem::path module_file(const Context& ctx, std::string_view module) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(ctx.target().kernel_dir(), ec)) {
    if (e.is_regular_file() && e.path().stem() == module) return e.path();
  }
  skip("no file of module '" + std::string(module) + "' in " + ctx.target().kernel_dir().string());
}

void check_not_trapped(const std::string& what) {
  const std::ptrdiff_t hit = trapped_offset.exchange(-1);
  GPUPLUG_CHECK_MSG(hit < 0, "breaks ABI-3: " << what << ": the core called slot '" << slot_at(hit)
                                              << "', which lies past the table's struct_size");
}

/// Whether `t` (as the core will copy it) fills every event slot, none of them, or some.
enum class Events { none, all, some };
Events events_in(const Table& t, std::size_t covered) {
  std::size_t present = 0, total = 0;
  for (const Slot& s : slots()) {
    if (abi::find_slot(s.name)->group == abi::SlotGroup::events) {
      ++total;
      void* p = nullptr;
      std::memcpy(&p, reinterpret_cast<const char*>(&t) + s.offset, sizeof p);
      present += (s.end <= covered && p != nullptr);
    }
  }
  return present == 0 ? Events::none : present == total ? Events::all : Events::some;
}

/// Makes a backend from `table` through the core and runs what every table must support with
/// the defaults of its missing slots (ABI-2): device info, allocation, synchronous and
/// asynchronous copies on a stream of its own, a module loaded from its file, a launch, the
/// allocation report, and events (supported when the table has them all, else unsupported).
/// `covered`: how many bytes of `table` the core may use (ABI-3); `what` names the table.
void exercise(Context& ctx, const Table& table, std::size_t covered, const std::string& what);

void run_table(Context& ctx, const Table& table, std::size_t covered, const std::string& what) {
  trapped_offset.store(-1);
  try {
    exercise(ctx, table, covered, what);
  } catch (...) {
    // A trap that was called fails the slot it stands in for; say so, not what followed.
    check_not_trapped(what);
    throw;
  }
  check_not_trapped(what);
}

void exercise(Context& ctx, const Table& table, std::size_t covered, const std::string& what) {
  std::shared_ptr<GpuBackend> gpu;
  try {
    gpu = create_backend_from_table(ctx.target().plugin_file, table, ctx.target().ordinal);
  } catch (const Error& e) {
    fail("breaks ABI-2: " + what + " was refused: " + describe(e));
  }
  GPUPLUG_CHECK_EQ(std::string(gpu->plugin_name()), ctx.target().plugin);
  (void)gpu->device_info();

  const std::vector<float> x{1, 2, 3, 4}, y{1, 1, 1, 1};
  GPUPLUG_CHECK_MSG((run_axpy(*gpu, 2.0f, x, y) == std::vector<float>{3, 5, 7, 9}),
                    "breaks ABI-2: axpy through " << what << " gave wrong results");

  // Async copies: the plugin's slots, or the default (synchronize the stream, copy) when the
  // table ends before them.
  const Stream s = gpu->create_stream();
  const std::vector<std::uint32_t> up{0xdeadbeef, 1, 2, 3};
  std::vector<std::uint32_t> down(up.size(), 0);
  const DevicePtr d = gpu->alloc(up.size() * sizeof(std::uint32_t), "abi_skew");
  gpu->copy_h2d_async(d, up.data(), up.size() * sizeof(std::uint32_t), s);
  gpu->copy_d2h_async(down.data(), d, down.size() * sizeof(std::uint32_t), s);
  gpu->synchronize(s);
  GPUPLUG_CHECK_MSG(down == up, "breaks ABI-2: async copies through " << what << " lost data");
  gpu->free(d);
  gpu->destroy_stream(s);

  // load_module_file: the plugin's slot when the table covers it, else the core reads the file.
  gpu->load_module_file("abi_skew_axpy", module_file(ctx, "axpy"));
  GPUPLUG_CHECK(gpu->has_module("abi_skew_axpy"));
  GPUPLUG_CHECK(gpu->kernel("abi_skew_axpy", "axpy").value != 0);
  gpu->unload_module("abi_skew_axpy");
  GPUPLUG_CHECK(!gpu->alloc_report(3).empty());
  // memory_snapshot: the plugin's ledger_snapshot when the table covers it, else the counters
  // (partial). Either way it reads back as JSON.
  {
    const MemorySnapshot snapshot = gpu->memory_snapshot();
    const bool has_slot =
        covered >= offsetof(Table, ledger_snapshot) + sizeof(void*) && table.ledger_snapshot;
    GPUPLUG_CHECK_MSG(snapshot.complete == has_slot, "breaks ABI-2: the memory snapshot through "
                                                         << what
                                                         << " says complete=" << snapshot.complete);
    (void)parse_memory_snapshot(to_json(snapshot), what);
  }

  switch (events_in(table, covered)) {
    case Events::none: {
      const Error e = GPUPLUG_CHECK_THROWS(gpu->create_event(), Status::unsupported);
      GPUPLUG_CHECK_MSG(contains(e.what(), "create_event"),
                        "breaks ABI-2: events of " << what
                                                   << " are unsupported, but the error does not "
                                                      "name create_event: "
                                                   << e.what());
      break;
    }
    case Events::all: {
      // The slots are there; the events behind them are still the plugin's choice (the SDK's
      // vendor_event_* default is unsupported, as in the template plugin).
      Event ev;
      try {
        ev = gpu->create_event();
      } catch (const Error& e) {
        if (e.status() != Status::unsupported) throw;
        ctx.note(what + ": event slots present, events unsupported by the plugin: " + e.what());
        break;
      }
      gpu->record(ev);
      gpu->synchronize(ev);
      GPUPLUG_CHECK_MSG(gpu->query(ev),
                        "breaks ABI-2: a synchronized event of " << what << " is not ready");
      gpu->destroy_event(ev);
      break;
    }
    case Events::some:
      ctx.note(what + ": some event slots only; events not exercised");
      break;
  }
  gpu->op_cache().release(*gpu);
  GPUPLUG_CHECK_EQ(gpu->ledger_stats().live_count, 0u);
  gpu.reset();
}

// ---- the plugin's answers to hosts of other versions (ABI-4) ------------------------------------

/// What the plugin answers to the newest 1.x host: its own version.
std::uint32_t own_minor(const RawPlugin& plugin) {
  return GPUPLUG_ABI_MINOR(answer(plugin, version(1, 0xFFFF)).abi_version);
}

/// Checks the answer to a host of 1.<host_minor> and runs it through the core.
void check_answer(Context& ctx, std::uint32_t host_minor) {
  RawPlugin plugin(ctx.target().plugin_file);
  const std::uint32_t own = own_minor(plugin);
  const Table& t = answer(plugin, version(1, host_minor));
  const std::string who =
      GPUPLUG_PLUGIN_ENTRY_SYMBOL "(" + version_text(version(1, host_minor)) + ")";
  GPUPLUG_CHECK_MSG(GPUPLUG_ABI_MAJOR(t.abi_version) == 1,
                    "breaks ABI-4: " << who << " answered ABI " << version_text(t.abi_version));
  const std::uint32_t shared = std::min(host_minor, own);
  GPUPLUG_CHECK_MSG(GPUPLUG_ABI_MINOR(t.abi_version) == shared,
                    "breaks ABI-4: " << who << " answered ABI " << version_text(t.abi_version)
                                     << ", not 1." << shared
                                     << ", the highest version both share (the plugin speaks 1."
                                     << own << ")");
  GPUPLUG_CHECK_MSG(t.struct_size >= GPUPLUG_PLUGIN_V1_MIN_SIZE,
                    "breaks ABI-3: " << who << " answered a table of " << t.struct_size
                                     << " bytes, below the smallest v1 table ("
                                     << GPUPLUG_PLUGIN_V1_MIN_SIZE << ")");
  if (const std::size_t limit = table_size_of_minor(shared); limit != 0) {
    GPUPLUG_CHECK_MSG(t.struct_size <= limit, "breaks ABI-1: " << who << " answered ABI 1."
                                                               << shared << " with a table of "
                                                               << t.struct_size << " bytes; the 1."
                                                               << shared << " table has " << limit);
  }
  const std::size_t n = readable(t);
  run_table(ctx, trapped_copy(t, n, t.struct_size), n, "the table answered to " + who);
}

void host_1_0(Context& ctx) { check_answer(ctx, 0); }
void host_1_1(Context& ctx) { check_answer(ctx, 1); }
void host_1_99(Context& ctx) {
  check_answer(ctx, 99);
  // ABI-4 again: a host that speaks more never gets less than a host that speaks less.
  RawPlugin plugin(ctx.target().plugin_file);
  GPUPLUG_CHECK_MSG(GPUPLUG_ABI_MINOR(answer(plugin, version(1, 99)).abi_version) >=
                        GPUPLUG_ABI_MINOR(answer(plugin, version(1, 1)).abi_version),
                    "breaks ABI-4: the plugin answers a 1.99 host with less than a 1.1 host");
}

void host_2_0(Context& ctx) {
  RawPlugin plugin(ctx.target().plugin_file);
  const Table* t = plugin.entry(version(2, 0));
  if (t == nullptr) {
    ctx.note("refused by the plugin: " GPUPLUG_PLUGIN_ENTRY_SYMBOL "(2.0) returned null");
  } else {
    // A 1.x table given to a 2.0 host: that host refuses it by its major (ABI-5). Whatever the
    // table says, this 1.x core must refuse a table of major 2 with a message naming both.
    GPUPLUG_CHECK_MSG(GPUPLUG_ABI_MAJOR(t->abi_version) == GPUPLUG_ABI_VERSION_MAJOR,
                      "breaks ABI-5: " GPUPLUG_PLUGIN_ENTRY_SYMBOL "(2.0) answered ABI "
                          << version_text(t->abi_version)
                          << ": a plugin of major 1 answers another major with its own table "
                             "(which that host refuses by its major) or null");
  }
  // The core's side, whatever the plugin did: a table of another major is refused, naming both
  // versions, before anything past the header is read.
  const Table& own = answer(plugin, GPUPLUG_ABI_VERSION);
  const std::size_t n = readable(own);
  Table other = trapped_copy(own, n, own.struct_size);
  other.abi_version = version(2, 0);
  trapped_offset.store(-1);
  const Error e = GPUPLUG_CHECK_THROWS(
      create_backend_from_table(ctx.target().plugin_file, other, ctx.target().ordinal),
      Status::invalid_argument);
  GPUPLUG_CHECK_MSG(
      contains(e.what(), "ABI mismatch") && contains(e.what(), "2.0") &&
          contains(e.what(), version_text(GPUPLUG_ABI_VERSION)),
      "breaks ABI-5: a table of ABI 2.0 was refused without naming both versions: " << e.what());
  check_not_trapped("a table of ABI 2.0");
}

// ---- the core with tables of every size (ABI-2, ABI-3) ------------------------------------------

void truncated_tables(Context& ctx) {
  RawPlugin plugin(ctx.target().plugin_file);
  const Table& own = answer(plugin, GPUPLUG_ABI_VERSION);
  const std::size_t n = readable(own);
  // Below the smallest table: refused, naming the sizes.
  {
    const std::uint32_t small = GPUPLUG_PLUGIN_V1_MIN_SIZE - sizeof(void*);
    const Error e = GPUPLUG_CHECK_THROWS(
        create_backend_from_table(ctx.target().plugin_file, trapped_copy(own, small, small),
                                  ctx.target().ordinal),
        Status::invalid_argument);
    GPUPLUG_CHECK_MSG(contains(e.what(), "too small") && contains(e.what(), std::to_string(small)),
                      "breaks ABI-3: a table of " << small << " bytes was refused without saying "
                                                  << "it is too small: " << e.what());
    check_not_trapped("a table below the smallest size");
  }
  // At each slot boundary from the first release's table up to what the plugin published: the
  // slots past the boundary are traps, and every one of them must get its default.
  std::size_t boundaries = 0;
  for (const Slot& s : slots()) {
    if (s.end < GPUPLUG_PLUGIN_V1_MIN_SIZE || s.end > n) continue;
    ++boundaries;
    const Table t = trapped_copy(own, s.end, static_cast<std::uint32_t>(s.end));
    run_table(ctx, t, s.end,
              "a table truncated after '" + std::string(s.name) + "' (struct_size " +
                  std::to_string(s.end) + ")");
  }
  ctx.note(std::to_string(boundaries) + " slot boundaries from " +
           std::to_string(GPUPLUG_PLUGIN_V1_MIN_SIZE) + " to " + std::to_string(n) + " bytes");
}

void padded_table(Context& ctx) {
  RawPlugin plugin(ctx.target().plugin_file);
  const Table& own = answer(plugin, GPUPLUG_ABI_VERSION);
  const std::size_t n = readable(own);
  // The table the plugin published, followed by garbage: traps in every slot position past its
  // struct_size, and 0xFF bytes past the end of the table this suite knows.
  struct Padded {
    Table table;
    unsigned char garbage[256];
  } padded{};
  padded.table = trapped_copy(own, n, static_cast<std::uint32_t>(n));
  std::memset(padded.garbage, 0xFF, sizeof padded.garbage);
  run_table(ctx, padded.table, n,
            "the plugin's table (struct_size " + std::to_string(n) + ") padded with garbage");
}

void declared_1_0_oversized(Context& ctx) {
  // A table that declares ABI 1.0 but whose struct_size claims the whole 1.1 table (a wrong size,
  // as PJRT shipped twice): the core trusts the smaller of the two (ABI-3) and never calls the
  // event or inspect_module slots, here traps.
  RawPlugin plugin(ctx.target().plugin_file);
  const Table& own = answer(plugin, version(1, 0));
  const std::size_t n = std::min<std::size_t>(readable(own), GPUPLUG_PLUGIN_V1_0_SIZE);
  Table t = trapped_copy(own, n, static_cast<std::uint32_t>(sizeof(Table)));
  t.abi_version = version(1, 0);
  run_table(
      ctx, t, n,
      "a table of ABI 1.0 whose struct_size claims " + std::to_string(sizeof(Table)) + " bytes");
}

void future_minor(Context& ctx) {
  // A plugin of a later minor (1.<ours + 1>) with a table larger than this core knows: accepted,
  // and only the known prefix used (ABI-1, ABI-3). Its extra slots are 0xFF bytes.
  RawPlugin plugin(ctx.target().plugin_file);
  const Table& own = answer(plugin, GPUPLUG_ABI_VERSION);
  const std::size_t n = readable(own);
  struct Larger {
    Table table;
    unsigned char later_slots[8 * sizeof(void*)];
  } larger{};
  // A plugin older than this core leaves what it does not publish zero: null in the later table.
  std::memcpy(&larger.table, &own, n);
  std::memset(larger.later_slots, 0xFF, sizeof larger.later_slots);
  larger.table.struct_size = static_cast<std::uint32_t>(sizeof larger);
  larger.table.abi_version = version(GPUPLUG_ABI_VERSION_MAJOR, GPUPLUG_ABI_VERSION_MINOR + 1);
  run_table(ctx, larger.table, n,
            "a table of ABI " + version_text(larger.table.abi_version) + " (struct_size " +
                std::to_string(sizeof larger) + ")");
}

const Case cases[] = {
    {"abi_skew_host_1_0",
     "a host of ABI 1.0 gets a 1.0 table (abi_version 1.0, struct_size within the 1.0 table) "
     "that works under this core, events unsupported",
     host_1_0},
    {"abi_skew_host_1_1", "a host of ABI 1.1 gets the highest version both share", host_1_1},
    {"abi_skew_host_1_99", "a host of ABI 1.99 gets the highest version both share", host_1_99},
    {"abi_skew_host_2_0",
     "a host of ABI 2.0 is refused: by the plugin (null), or by the core naming both versions",
     host_2_0},
    {"abi_skew_truncated_tables",
     "tables truncated at each slot boundary load and work with the defaults of the missing slots",
     truncated_tables},
    {"abi_skew_padded_table", "garbage past struct_size is never read", padded_table},
    {"abi_skew_declared_1_0_oversized",
     "a 1.0 table whose struct_size claims more is read only as far as the 1.0 table",
     declared_1_0_oversized},
    {"abi_skew_future_minor",
     "a table of a later minor, larger than the core knows, is accepted and only its known prefix "
     "used",
     future_minor},
};

}  // namespace

std::span<const Case> skew_cases() { return cases; }

}  // namespace gpuplug::conformance::detail
