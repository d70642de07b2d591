// SPDX-License-Identifier: Apache-2.0
// Conformance cases for modules and launches: modules_dir, images from bytes, symbols and their
// errors.
#include <random>

#include "helpers.hpp"

namespace gpuplug::conformance::detail {

namespace {

void modules_dir_default(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  for (const char* module : {"axpy", "gemm", "e4m3", "activation"}) {
    GPUPLUG_CHECK_MSG(gpu.has_module(module),
                      "has_module(\"" << module << "\") is false: the default modules_dir ("
                                      << ctx.target().kernel_dir().string()
                                      << ") should provide it");
  }
  GPUPLUG_CHECK(!gpu.has_module("no_such_module"));
  GPUPLUG_CHECK(gpu.kernel("axpy", "axpy"));
  GPUPLUG_CHECK(gpu.kernel("gemm", "gemm_f32"));
  GPUPLUG_CHECK(gpu.kernel("gemm", "gemm_a_e4m3"));
  GPUPLUG_CHECK(gpu.kernel("e4m3", "cast_f32_e4m3"));
  GPUPLUG_CHECK(gpu.kernel("e4m3", "cast_e4m3_f32"));
  GPUPLUG_CHECK(gpu.kernel("activation", "bias_relu"));
}

void unknown_module(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  const Error e = GPUPLUG_CHECK_THROWS(gpu.kernel("no_such_module", "f"), Status::not_found);
  GPUPLUG_CHECK_MSG(contains(e.what(), "no_such_module"),
                    "the error does not name the module: " << e.what());
  GPUPLUG_CHECK_THROWS(gpu.op_cache().kernel(gpu, "no_such_module", "f"), Status::not_found);
  GPUPLUG_CHECK_EQ(gpu.op_cache().kernel_count(), 0u);  // nothing memoized on failure
  // A module name is a name, never a path: nothing outside modules_dir can be reached by one.
  GPUPLUG_CHECK_THROWS(gpu.kernel("../host/gemm", "gemm_f32"), Status::invalid_argument);
  // A symbol of an unknown module is either reported absent or an error naming the module.
  try {
    const auto sym = gpu.device_symbol("no_such_module", "x");
    GPUPLUG_CHECK_MSG(!sym.has_value(),
                      "device_symbol found a symbol in a module that does not exist");
  } catch (const Error& err) {
    GPUPLUG_CHECK_MSG(contains(err.what(), "no_such_module"),
                      "the error does not name the module: " << err.what());
  }
}

void unknown_function_lists_functions(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  const Error e = GPUPLUG_CHECK_THROWS(gpu.kernel("gemm", "gemm_f16"), Status::not_found);
  const std::string what = e.what();
  GPUPLUG_CHECK_MSG(contains(what, "gemm_f16"), "the error does not name the function: " << what);
  GPUPLUG_CHECK_MSG(contains(what, "gemm_f32") && contains(what, "gemm_a_e4m3"),
                    "the error does not list the module's functions: " << what);
}

void corrupt_module_image(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  std::vector<std::byte> junk(4096);
  std::mt19937 gen(42);
  for (auto& b : junk) b = static_cast<std::byte>(gen());
  const Error e = GPUPLUG_CHECK_THROWS(gpu.load_module("corrupt", junk), Status::invalid_image);
  GPUPLUG_CHECK_MSG(contains(e.what(), "corrupt"),
                    "the error does not name the module: " << e.what());
  GPUPLUG_CHECK(!gpu.has_module("corrupt"));

  // A real image cut in half: its header looks right, the rest is missing.
  const auto image = ctx.module_image("axpy");
  const std::vector<std::byte> truncated(
      image.begin(), image.begin() + static_cast<std::ptrdiff_t>(image.size() / 2));
  const Error cut =
      GPUPLUG_CHECK_THROWS(gpu.load_module("corrupt", truncated), Status::invalid_image);
  GPUPLUG_CHECK_MSG(contains(cut.what(), "corrupt"),
                    "the error does not name the module: " << cut.what());
  // An empty image.
  const Error empty =
      GPUPLUG_CHECK_THROWS_ANY(gpu.load_module("corrupt", std::span<const std::byte>{}));
  GPUPLUG_CHECK_MSG(
      empty.status() == Status::invalid_image || empty.status() == Status::invalid_argument,
      "an empty image gave " << detail::describe(empty)
                             << ", expected invalid_image or invalid_argument");
  // Failed loads leave the name free.
  GPUPLUG_CHECK(!gpu.has_module("corrupt"));
  gpu.load_module("corrupt", image);
  GPUPLUG_CHECK(gpu.kernel("corrupt", "axpy"));
}

void load_module_from_bytes(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  const auto image = ctx.module_image("axpy");
  gpu.load_module("axpy_from_bytes", image);
  GPUPLUG_CHECK(gpu.has_module("axpy_from_bytes"));
  const KernelHandle f = gpu.kernel("axpy_from_bytes", "axpy");
  GPUPLUG_CHECK(f);
  {
    const std::vector<float> x{1, 2, 3, 4, 5}, y{10, 20, 30, 40, 50};
    DeviceBuffer dx = to_device(gpu, x), dy = to_device(gpu, y);
    gpu.launch_args(f, Dim3{1, 1, 1}, Dim3{256, 1, 1}, 0, Stream{}, std::uint32_t{5}, 2.0f,
                    dx.ptr().value, dy.ptr().value);
    gpu.synchronize();
    GPUPLUG_CHECK((dy.download<float>(5) == std::vector<float>{12, 24, 36, 48, 60}));
  }
  const Error dup =
      GPUPLUG_CHECK_THROWS(gpu.load_module("axpy_from_bytes", image), Status::invalid_argument);
  GPUPLUG_CHECK_MSG(contains(dup.what(), "axpy_from_bytes"),
                    "the error does not name the module: " << dup.what());

  try {
    gpu.unload_module("axpy_from_bytes");
  } catch (const Error& e) {
    if (e.status() != Status::unsupported) throw;
    ctx.note("unload_module is unsupported (optional slot)");
    return;
  }
  GPUPLUG_CHECK(!gpu.has_module("axpy_from_bytes"));
  GPUPLUG_CHECK_THROWS(gpu.kernel("axpy_from_bytes", "axpy"), Status::not_found);
  GPUPLUG_CHECK_THROWS(gpu.unload_module("axpy_from_bytes"), Status::not_found);
  gpu.load_module("axpy_from_bytes", image);  // the name is free again
  GPUPLUG_CHECK(gpu.kernel("axpy_from_bytes", "axpy"));
}

void load_module_file_errors(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  const Error e =
      GPUPLUG_CHECK_THROWS_ANY(gpu.load_module_file("missing", "/nonexistent/gpuplug/missing.bin"));
  GPUPLUG_CHECK_MSG(contains(e.what(), "/nonexistent/gpuplug/missing.bin"),
                    "the error does not name the file: " << e.what());
  GPUPLUG_CHECK(!gpu.has_module("missing"));
}

void device_symbols(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  const auto tile = gpu.device_symbol("gemm", "gemm_f32_n_tile");
  GPUPLUG_CHECK_MSG(tile.has_value(), "gemm does not publish gemm_f32_n_tile");
  GPUPLUG_CHECK_EQ(tile->bytes, 4u);
  std::uint32_t n_tile = 0;
  gpu.copy_d2h(&n_tile, tile->address, sizeof n_tile);
  GPUPLUG_CHECK_MSG(n_tile > 0, "gemm_f32_n_tile is 0");

  const auto flag = gpu.device_symbol("gemm", "gemm_a_e4m3_a_e4m3");
  GPUPLUG_CHECK_MSG(flag.has_value(), "gemm does not publish gemm_a_e4m3_a_e4m3");
  GPUPLUG_CHECK_EQ(flag->bytes, 4u);
  std::uint32_t a_e4m3 = 0;
  gpu.copy_d2h(&a_e4m3, flag->address, sizeof a_e4m3);
  GPUPLUG_CHECK_EQ(a_e4m3, 1u);

  GPUPLUG_CHECK(!gpu.device_symbol("gemm", "no_such_symbol").has_value());
  GPUPLUG_CHECK(!gpu.device_symbol("gemm", "gemm_f32_a_e4m3").has_value());
  GPUPLUG_CHECK(!gpu.device_symbol("axpy", "axpy_n_tile").has_value());
}

// Runs axpy (a = 3) on n random elements and one guard element past them, in blocks of `block`
// threads, and checks every element against the reference and the guard untouched.
void check_axpy(GpuBackend& gpu, std::uint32_t n, std::uint32_t block) {
  const std::string what = "axpy(n=" + std::to_string(n) + ", block " + std::to_string(block) + ")";
  const auto x = random_floats(n, 0.5f, 2.0f, 1);
  const auto y = random_floats(n, 0.5f, 2.0f, 2);
  std::vector<float> y_padded = y;
  y_padded.push_back(-7.0f);  // one element past n that must stay untouched
  DeviceBuffer dx = to_device(gpu, x), dy = to_device(gpu, y_padded);
  const KernelHandle f = gpu.op_cache().kernel(gpu, "axpy", "axpy");
  gpu.launch_args(f, Dim3{(n + block - 1) / block, 1, 1}, Dim3{block, 1, 1}, 0, Stream{}, n, 3.0f,
                  dx.ptr().value, dy.ptr().value);
  gpu.synchronize();
  auto got = dy.download<float>(n + 1);
  GPUPLUG_CHECK_MSG(got[n] == -7.0f, what << " wrote past n");
  got.pop_back();
  check_within_ulps(got, reference_axpy(3.0f, x, y), 1, what, [&](std::size_t i) {
    return "a = 3, x = " + float_text(x[i]) + ", y = " + float_text(y[i]);
  });
}

void launch_axpy_checked(Context& ctx) {
  // One element, both sides of a block boundary, and sizes that are not a multiple of the block:
  // the kernel must guard its tail.
  for (const std::uint32_t n : {1u, 255u, 256u, 257u, 1000u, 100003u})
    check_axpy(ctx.backend(), n, 256);
}

void launch_grid_past_65535(Context& ctx) {
  // 65,535 workgroups a dimension is all Vulkan guarantees (maxComputeWorkGroupCount, lavapipe's
  // limit) and CUDA's limit in y and z; a grid of 131,073 one-thread blocks in x is three slices
  // there, and a plugin that splits it must run every block once, with its own block index.
  check_axpy(ctx.backend(), 2 * 65535 + 3, 1);
}

void launch_errors(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  DeviceBuffer x(gpu, 1024), y(gpu, 1024);
  const std::uint32_t n = 256;
  const float a = 1.0f;
  const std::uint64_t px = x.ptr().value, py = y.ptr().value;
  GPUPLUG_CHECK_THROWS(
      gpu.launch_args(KernelHandle{}, Dim3{1, 1, 1}, Dim3{256, 1, 1}, 0, Stream{}, n, a, px, py),
      Status::invalid_argument);
  const KernelHandle f = gpu.op_cache().kernel(gpu, "axpy", "axpy");
  // An empty grid or block is an error of the caller, never a launch that does nothing.
  const auto refused = [&](Dim3 grid, Dim3 block) {
    try {
      gpu.launch_args(f, grid, block, 0, Stream{}, n, a, px, py);
    } catch (const Error&) {
      return true;
    }
    return false;
  };
  GPUPLUG_CHECK_MSG(refused(Dim3{0, 1, 1}, Dim3{256, 1, 1}),
                    "a launch with an empty grid (0 x 1 x 1 blocks) was accepted: it must be "
                    "refused with an error");
  GPUPLUG_CHECK_MSG(refused(Dim3{1, 1, 1}, Dim3{0, 1, 1}),
                    "a launch with an empty block (0 x 1 x 1 threads) was accepted: it must be "
                    "refused with an error");
  gpu.synchronize();
}

void launch_argument_count(Context& ctx) {
  // axpy publishes axpy_args (4, 4, 8, 8 bytes): a counted launch with another count or size
  // is refused by the core before the plugin sees it, and the buffers keep their bytes.
  GpuBackend& gpu = ctx.backend();
  const std::uint32_t n = 256;
  const float a = 2.0f;
  const std::vector<float> ones(n, 1.0f);
  DeviceBuffer dx = to_device(gpu, ones), dy = to_device(gpu, ones);
  const KernelHandle f = gpu.op_cache().kernel(gpu, "axpy", "axpy");
  const KernelSignature* sig = gpu.kernel_signature(f);
  GPUPLUG_CHECK_MSG(sig != nullptr, "no signature recorded for axpy::axpy, which publishes "
                                    "axpy_args");
  GPUPLUG_CHECK_EQ(sig->name, std::string("axpy::axpy"));
  GPUPLUG_CHECK(sig->sizes == (std::vector<std::uint32_t>{4, 4, 8, 8}));
  const Dim3 grid{1, 1, 1}, block{256, 1, 1};
  const auto refusal = [&](auto&& launch) -> std::string {
    try {
      launch();
    } catch (const Error& e) {
      GPUPLUG_CHECK_EQ(e.status(), Status::invalid_argument);
      GPUPLUG_CHECK_EQ(e.operation(), std::string("launch"));
      return e.message();
    }
    return "";
  };
  const std::string three = refusal([&] {
    gpu.launch(f, grid, block, 0, Stream{}, {n, a, dx.ptr()});
  });
  GPUPLUG_CHECK_MSG(contains(three, "kernel axpy::axpy takes 4 arguments (4, 4, 8, 8 bytes), "
                                    "given 3 arguments (4, 4, 8 bytes)"),
                    "three arguments to axpy: '" << three << "'");
  const std::string wide = refusal([&] {
    gpu.launch_args(f, grid, block, 0, Stream{}, std::uint64_t{n}, a, dx.ptr(), dy.ptr());
  });
  GPUPLUG_CHECK_MSG(contains(wide, "given 4 arguments (8, 4, 8, 8 bytes)"),
                    "a 64-bit n to axpy: '" << wide << "'");
  gpu.synchronize();
  GPUPLUG_CHECK_MSG(dy.download<float>(n) == ones, "a refused launch wrote to y");
  gpu.launch(f, grid, block, 0, Stream{}, {n, a, dx.ptr(), dy.ptr()});
  gpu.synchronize();
  GPUPLUG_CHECK_MSG(dy.download<float>(n) == std::vector<float>(n, 3.0f),
                    "the counted launch of axpy with its four arguments did not compute y = 2x + y");
}

void activation_bias_relu(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  const std::uint32_t rows = 13, cols = 77;
  const auto bias = random_floats(cols, -1.0f, 1.0f, 5);
  const auto x = random_floats(std::size_t{rows} * cols, -2.0f, 2.0f, 6);
  std::vector<float> want(x.size());
  for (std::uint32_t r = 0; r < rows; ++r) {
    for (std::uint32_t c = 0; c < cols; ++c) {
      const std::size_t i = std::size_t{r} * cols + c;
      want[i] = std::max(x[i] + bias[c], 0.0f);
    }
  }
  check_bits_equal(run_bias_relu(gpu, rows, cols, bias, x), want,
                   "bias_relu (exact: one addition, one max)", [&](std::size_t i) {
                     return "row " + std::to_string(i / cols) + ", x = " + float_text(x[i]) +
                            ", bias = " + float_text(bias[i % cols]);
                   });
}

const Case cases[] = {
    {"modules_dir_default", "the default modules_dir provides every sample module and kernel",
     modules_dir_default},
    {"unknown_module",
     "an unknown module is not_found naming it, nothing is memoized; a path is no module name",
     unknown_module},
    {"unknown_function_lists_functions",
     "an unknown function is not_found listing the module's functions",
     unknown_function_lists_functions},
    {"corrupt_module_image",
     "random, truncated and empty images are refused and leave the name free",
     corrupt_module_image},
    {"load_module_from_bytes",
     "a module loaded from bytes runs; names are unique; unload frees the name",
     load_module_from_bytes},
    {"load_module_file_errors", "load_module_file of a missing file is an error naming the file",
     load_module_file_errors},
    {"device_symbols", "published 4-byte symbols are found and readable; absent ones are nullopt",
     device_symbols},
    {"launch_axpy",
     "axpy by the launch rule, n from 1 to 100003, matches the reference and writes nothing past n",
     launch_axpy_checked},
    {"launch_grid_past_65535",
     "axpy on 131,073 blocks in x (past Vulkan's guaranteed 65,535) runs every block once",
     launch_grid_past_65535},
    {"launch_errors", "a null kernel and empty grids or blocks are refused", launch_errors},
    {"launch_argument_count",
     "a counted launch with another argument count or size than <func>_args is invalid_argument",
     launch_argument_count},
    {"activation_bias_relu", "bias_relu matches the CPU bit for bit", activation_bias_relu},
};

}  // namespace

std::span<const Case> module_cases() { return cases; }

}  // namespace gpuplug::conformance::detail
