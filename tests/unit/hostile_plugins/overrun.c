/* SPDX-License-Identifier: Apache-2.0
 * Hostile plugin that lies about lengths and sends control characters: its probe message fills
 * the field with no terminator, its version string forges a line and carries an ESC sequence,
 * its device name is not UTF-8 (and its ABI 1.1 device fields hold values no device has), and
 * last_error / ledger_report claim a 1 TiB message. It is
 * otherwise usable (one device, an instance whose allocations fail), so that the core's copies
 * of those lengths are reached. */
#include <stdlib.h>

#include "../fake_plugins/fake_table.h"

static gpuplug_plugin_v1 table;
static const size_t kClaimed = (size_t)1 << 40;

static gpuplug_status_t probe_unterminated(gpuplug_probe_result_t* out) {
  out->reason = GPUPLUG_PROBE_AVAILABLE;
  out->device_count = 1;
  memset(out->message, 'A', sizeof out->message); /* no NUL anywhere */
  return GPUPLUG_STATUS_SUCCESS;
}

static gpuplug_status_t describe_latin1(uint32_t ordinal, gpuplug_device_info_t* out) {
  out->ordinal = ordinal;
  memset(out->name, 'N', sizeof out->name); /* no terminator */
  out->name[0] = (char)0xE9;                /* Latin-1 e-acute: not UTF-8 */
  out->name[1] = '\x1b';
  out->total_memory = 1u << 20;
  /* ABI 1.1 fields no device can have: a PCI device above 0x1f, ids above 0xffff, a class no
   * core knows, version texts with no terminator. */
  if (out->struct_size >= GPUPLUG_DEVICE_INFO_V1_1_SIZE) {
    out->has_pci = 1;
    out->pci_bus = 0x1ff;
    out->pci_device = 0x40;
    out->pci_function = 9;
    out->pci_vendor_id = 0x12345;
    out->pci_device_id = 0xfffff;
    memset(out->driver_version, 'V', sizeof out->driver_version);
    memset(out->runtime_version, 'R', sizeof out->runtime_version);
    out->device_class = 99;
  }
  return GPUPLUG_STATUS_SUCCESS;
}

static int instance_tag;
static gpuplug_status_t create_dummy(uint32_t ordinal, const gpuplug_option_t* options,
                                     uint32_t count, const gpuplug_host_services_t* services,
                                     gpuplug_instance_t* out, char* error, size_t error_size) {
  (void)ordinal, (void)options, (void)count, (void)services, (void)error, (void)error_size;
  *out = (gpuplug_instance_t)&instance_tag;
  return GPUPLUG_STATUS_SUCCESS;
}
static gpuplug_status_t alloc_fails(gpuplug_instance_t i, uint64_t b, const char* s, uint64_t* o) {
  (void)i, (void)b, (void)s, (void)o;
  return GPUPLUG_STATUS_OUT_OF_MEMORY;
}
static size_t huge_last_error(gpuplug_instance_t inst, char* buf, size_t size) {
  (void)inst;
  if (size > 0) {
    strncpy(buf, "out of fake memory", size - 1);
    buf[size - 1] = '\0';
  }
  return kClaimed;
}
static size_t huge_report(gpuplug_instance_t inst, uint32_t top_n, char* buf, size_t size) {
  (void)inst, (void)top_n;
  if (size > 0) buf[0] = '\0';
  return kClaimed;
}
static gpuplug_status_t no_stats(gpuplug_instance_t i, gpuplug_ledger_stats_t* o) {
  (void)i;
  memset((char*)o + sizeof o->struct_size, 0, o->struct_size - sizeof o->struct_size);
  return GPUPLUG_STATUS_SUCCESS;
}

GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) {
  (void)host_abi_version;
  fake_fill_table(&table);
  table.name = "hostile_overrun";
  table.version = "1.0\r\n[host] available\x1b[31m";
  table.probe = probe_unterminated;
  table.describe_device = describe_latin1;
  table.create = create_dummy;
  table.alloc = alloc_fails;
  table.last_error = huge_last_error;
  table.ledger_report = huge_report;
  table.ledger_stats = no_stats;
  table.sweep_unreleased = no_stats;
  return &table;
}
