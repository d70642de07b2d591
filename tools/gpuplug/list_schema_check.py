#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""CTest driver: list_schema_check.py <gpuplug> <list.schema.json>

Runs `gpuplug list --json` and checks the document against the JSON Schema installed as
share/gpuplug/list.schema.json, then checks what a user relies on in the device fields:
  - host: device_class cpu, warp 1, no PCI, the kernel release as driver_version, the machine's
    architecture, and a UUID that is the documented derivation (SHA-256 of "gpuplug host device
    v1", machine-id and the CPU model, as a version-8 UUID) computed here independently, and the
    same in a second run (another process);
  - hip, when GPUPLUG_PLUGIN_PATH names it (with the fake runtime of tests/unit/fake_hip on
    LD_LIBRARY_PATH): both fake devices' PCI addresses, ids, versions and classes.
python3-jsonschema is required (scripts/lib/common.sh installs it): without it this fails.
"""
import hashlib
import json
import os
import platform
import subprocess
import sys

try:
    import jsonschema
except ImportError:
    sys.exit("FAIL: python3-jsonschema is not installed (scripts/lib/common.sh installs it; "
             "apt-get install python3-jsonschema)")

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def run_list(tool):
    out = subprocess.run([tool, "list", "--json"], capture_output=True, check=True, timeout=90)
    return json.loads(out.stdout.decode("utf-8"))


def machine_id():
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            with open(path, "rb") as f:
                text = f.read(64).decode("ascii", "replace").rstrip("\n")
        except OSError:
            continue
        if len(text) == 32 and all(c in "0123456789abcdef" for c in text) and text.strip("0"):
            return text
    return None


def expected_host_uuid(cpu_model):
    mid = machine_id()
    if mid is None:
        return ""
    d = bytearray(hashlib.sha256(b"gpuplug host device v1\0" + mid.encode() + b"\0" +
                                 cpu_model.encode("utf-8", "surrogateescape")).digest())
    d[6] = (d[6] & 0x0F) | 0x80
    d[8] = (d[8] & 0x3F) | 0x80
    h = d[:16].hex()
    return f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def plugin(doc, name):
    found = [p for p in doc["plugins"] if p["name"] == name]
    check(len(found) == 1, f"expected one plugin named {name}, found {len(found)}")
    return found[0] if found else None


def main():
    tool, schema_path = sys.argv[1], sys.argv[2]
    with open(schema_path, encoding="utf-8") as f:
        schema = json.load(f)
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    validator = validator_class(schema)

    doc = run_list(tool)
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    for e in errors:
        failures.append(f"schema: {'/'.join(str(p) for p in e.path)}: {e.message}")
    check(doc.get("schema") == 1, f"schema is {doc.get('schema')!r}, expected 1")
    # The validator must be able to fail: a document without "schema" is rejected.
    broken = dict(doc)
    del broken["schema"]
    check(not validator.is_valid(broken), "the schema accepts a document without \"schema\"")

    host = plugin(doc, "host")
    if host is not None:
        check(host["state"] == "available", f"host is {host['state']}")
        check(host["abi_version"] == "1.3", f"host ABI {host['abi_version']}")
        d = host["devices"][0]
        check(d["device_class"] == "cpu", f"host class {d['device_class']}")
        check(d["warp_size"] == 1, f"host warp {d['warp_size']}")
        check(d["pci"] is None and d["pci_vendor_id"] == 0, "host has a PCI address")
        check(d["driver_version"] == platform.release(),
              f"host driver_version {d['driver_version']!r}, uname -r {platform.release()!r}")
        check(d["arch"].startswith(platform.machine()), f"host arch {d['arch']!r}")
        check(d["max_shared_memory_per_block"] == 64 << 20,
              f"host shared/block {d['max_shared_memory_per_block']}")
        want = expected_host_uuid(d["name"])
        check(d["uuid"] == want, f"host uuid {d['uuid']!r}, derived here {want!r}")
        if want:
            check(len(want) == 36 and want[14] == "8", f"not a version-8 UUID: {want}")
        again = plugin(run_list(tool), "host")
        if again is not None:
            check(again["devices"][0]["uuid"] == d["uuid"], "host uuid differs between runs")

    if "libgpuplug-hip.so" in os.environ.get("GPUPLUG_PLUGIN_PATH", ""):
        hip = plugin(doc, "hip")
        if hip is not None:
            check(hip["state"] == "available" and len(hip["devices"]) == 2,
                  f"fake hip: {hip['state']} ({hip['message']})")
            if len(hip["devices"]) == 2:
                d0, d1 = hip["devices"]
                check(d0["pci"] == "0000:c1:00.0", f"hip:0 pci {d0['pci']}")
                check(d1["pci"] == "0001:02:00.0", f"hip:1 pci {d1['pci']}")
                check(d0["pci_vendor_id"] == 0x1002, f"hip:0 vendor {d0['pci_vendor_id']}")
                check(d0["uuid"] == "GPU-0123456789abcdef", f"hip:0 uuid {d0['uuid']}")
                check(d0["arch"] == "gfx90a:sramecc+:xnack-", f"hip:0 arch {d0['arch']}")
                check((d0["warp_size"], d1["warp_size"]) == (64, 32), "hip warp sizes")
                check(d0["max_shared_memory_per_block"] == 65536, "hip:0 shared/block")
                check(d0["driver_version"] == "6.1.41134", f"hip driver {d0['driver_version']}")
                check(d0["runtime_version"] == "6.0.32830", f"hip runtime {d0['runtime_version']}")
                check((d0["device_class"], d1["device_class"]) == ("discrete_gpu",
                                                                   "integrated_gpu"),
                      "hip device classes")

    if failures:
        print(json.dumps(doc, indent=2))
        for f in failures:
            print("FAIL:", f)
        return 1
    print(f"gpuplug list --json: schema 1 valid, {len(doc['plugins'])} plugins checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
