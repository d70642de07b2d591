/* SPDX-License-Identifier: Apache-2.0
 * The real host plugin under another name (RANKED_NAME), declaring another device class
 * (RANKED_CLASS) and peak (RANKED_GFLOPS): a working plugin of any class, for the tests of auto's
 * ranking (discrete GPU, integrated GPU, emulator, ...) on a machine without any of them. Every
 * slot is the host's; only the name and the two ranking fields of describe_device and
 * device_info differ, and, with RANKED_PCI_BUS, a PCI address 0000:<bus>:00.0 (two such plugins
 * report one GPU). Built several times into a folder of its own, so discovery never finds it. */
#include <dlfcn.h>
#include <gpuplug/abi.h>
#include <string.h>

static gpuplug_plugin_v1 real_table;
static gpuplug_plugin_v1 ranked_table;
static int ranked_table_ready;

/* Only when the caller's struct holds the 1.1 fields (a 1.0 host never sees them). */
static void declare(gpuplug_device_info_t* out) {
  if (out->struct_size >= GPUPLUG_DEVICE_INFO_V1_1_SIZE) {
    out->device_class = RANKED_CLASS;
    out->peak_gflops = RANKED_GFLOPS;
#ifdef RANKED_PCI_BUS
    out->has_pci = 1;
    out->pci_domain = 0;
    out->pci_bus = RANKED_PCI_BUS;
    out->pci_device = 0;
    out->pci_function = 0;
#endif
  }
}

static gpuplug_status_t ranked_describe(uint32_t ordinal, gpuplug_device_info_t* out) {
  const gpuplug_status_t st = real_table.describe_device(ordinal, out);
  if (st == GPUPLUG_STATUS_SUCCESS) declare(out);
  return st;
}

static gpuplug_status_t ranked_device_info(gpuplug_instance_t inst, gpuplug_device_info_t* out) {
  const gpuplug_status_t st = real_table.device_info(inst, out);
  if (st == GPUPLUG_STATUS_SUCCESS) declare(out);
  return st;
}

GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) {
  if (!ranked_table_ready) {
    /* Never closed: the table's slots point into it. */
    void* real = dlopen(GPUPLUG_HOST_PLUGIN_FILE, RTLD_NOW | RTLD_LOCAL);
    if (real == NULL) return NULL;
    gpuplug_plugin_entry_fn entry = (gpuplug_plugin_entry_fn)dlsym(real, GPUPLUG_PLUGIN_ENTRY_SYMBOL);
    if (entry == NULL) return NULL;
    const gpuplug_plugin_v1* t = entry(host_abi_version);
    if (t == NULL || t->struct_size < GPUPLUG_PLUGIN_V1_0_SIZE) return NULL;
    const size_t size = t->struct_size < sizeof real_table ? t->struct_size : sizeof real_table;
    memset(&real_table, 0, sizeof real_table);
    memcpy(&real_table, t, size);
    ranked_table = real_table;
    ranked_table.struct_size = (uint32_t)size;
    ranked_table.name = RANKED_NAME;
    ranked_table.describe_device = ranked_describe;
    ranked_table.device_info = ranked_device_info;
    ranked_table_ready = 1;
  }
  return &ranked_table;
}
