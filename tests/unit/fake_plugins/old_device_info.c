/* SPDX-License-Identifier: Apache-2.0
 * The real host plugin as a plugin built against ABI 1.0 sees gpuplug_device_info_t: its
 * describe_device and device_info write at most GPUPLUG_DEVICE_INFO_V1_0_FULL_SIZE and say so in
 * struct_size, name "host_info_v1_0". Past that size they leave garbage (a PCI address, a warp
 * size, a device class, version text without a NUL), as stale memory would hold: a host must not
 * read it, and reports the ABI 1.1 fields of this plugin's devices as not reported. Built into a
 * folder of its own (with old_host.c), so discovery never finds it. */
#include <dlfcn.h>
#include <gpuplug/abi.h>
#include <string.h>

static gpuplug_plugin_v1 real_table;
static gpuplug_plugin_v1 old_table;
static int old_table_ready;

/* The real answer, cut to the 1.0 struct, then garbage past what it claims to have written. */
static void as_v1_0(gpuplug_device_info_t* out, const gpuplug_device_info_t* full,
                    uint32_t caller_size) {
  const uint32_t size = caller_size < GPUPLUG_DEVICE_INFO_V1_0_FULL_SIZE
                            ? caller_size
                            : (uint32_t)GPUPLUG_DEVICE_INFO_V1_0_FULL_SIZE;
  memcpy(out, full, size);
  out->struct_size = size;
  if (caller_size >= GPUPLUG_DEVICE_INFO_V1_1_SIZE) {
    out->has_pci = 1;
    out->pci_bus = 0xc1;
    out->pci_vendor_id = 0x10de;
    out->warp_size = 99;
    out->max_shared_memory_per_block = 12345;
    memset(out->driver_version, 'x', sizeof out->driver_version);
    out->device_class = GPUPLUG_DEVICE_CLASS_DISCRETE_GPU;
    out->peak_gflops = 777;
  }
}

static gpuplug_status_t old_describe(uint32_t ordinal, gpuplug_device_info_t* out) {
  gpuplug_device_info_t full;
  memset(&full, 0, sizeof full);
  full.struct_size = sizeof full;
  const gpuplug_status_t st = real_table.describe_device(ordinal, &full);
  if (st == GPUPLUG_STATUS_SUCCESS) as_v1_0(out, &full, out->struct_size);
  return st;
}

static gpuplug_status_t old_device_info(gpuplug_instance_t inst, gpuplug_device_info_t* out) {
  gpuplug_device_info_t full;
  memset(&full, 0, sizeof full);
  full.struct_size = sizeof full;
  const gpuplug_status_t st = real_table.device_info(inst, &full);
  if (st == GPUPLUG_STATUS_SUCCESS) as_v1_0(out, &full, out->struct_size);
  return st;
}

GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) {
  if (!old_table_ready) {
    /* Never closed: the table's slots point into it. */
    void* real = dlopen(GPUPLUG_HOST_PLUGIN_FILE, RTLD_NOW | RTLD_LOCAL);
    if (real == NULL) return NULL;
    gpuplug_plugin_entry_fn entry = (gpuplug_plugin_entry_fn)dlsym(real, GPUPLUG_PLUGIN_ENTRY_SYMBOL);
    if (entry == NULL) return NULL;
    const gpuplug_plugin_v1* t = entry(host_abi_version);
    if (t == NULL || t->struct_size < GPUPLUG_PLUGIN_V1_0_SIZE) return NULL;
    memset(&real_table, 0, sizeof real_table);
    memcpy(&real_table, t, GPUPLUG_PLUGIN_V1_0_SIZE);
    old_table = real_table;
    old_table.struct_size = (uint32_t)GPUPLUG_PLUGIN_V1_0_SIZE;
    old_table.abi_version = GPUPLUG_MAKE_VERSION(1, 0);
    old_table.name = "host_info_v1_0";
    old_table.describe_device = old_describe;
    old_table.device_info = old_device_info;
    old_table_ready = 1;
  }
  return &old_table;
}
