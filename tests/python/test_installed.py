# SPDX-License-Identifier: Apache-2.0
# The installed package: `cmake --install` into a fresh prefix puts gpuplug in
# <prefix>/<GPUPLUG_PYTHON_INSTALL_DIR>/gpuplug, and a Python given only that folder imports it,
# loads the prefix's libgpuplug (the extension's RUNPATH) and finds the prefix's host plugin.
import os
import subprocess
import sys

import pytest


def test_the_installed_package_works_from_its_prefix(tmp_path):
    build = os.environ.get("GPUPLUG_BUILD_DIR")
    where = os.environ.get("GPUPLUG_PYTHON_INSTALL_DIR")
    if not build or not where:
        pytest.skip("GPUPLUG_BUILD_DIR and GPUPLUG_PYTHON_INSTALL_DIR are not set; CTest sets them")
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", build, "--prefix", str(prefix)], check=True,
                   stdout=subprocess.DEVNULL, timeout=600)
    package = prefix / where / "gpuplug"
    for name in ["__init__.py", "__init__.pyi", "_gpuplug.pyi", "py.typed", "pytest_plugin.py", "testing.py"]:
        assert (package / name).is_file(), name
    code = """
import gpuplug, numpy
r = gpuplug.PluginRegistry(); r.discover()
host = [p for p in r.list() if p["name"] == "host"][0]
with r.create("host!") as gpu:
    b = gpu.alloc(16); gpu.copy_h2d(b, numpy.arange(4, dtype=numpy.float32))
    print(numpy.from_dlpack(gpuplug.as_array(b, "float32")).tolist())
maps = open("/proc/self/maps").read()
print(gpuplug.__file__)
print(host["path"])
print(sorted({l.split()[-1] for l in maps.splitlines() if "libgpuplug.so" in l}))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUPLUG_")}
    env["PYTHONPATH"] = str(prefix / where)
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    values, module, plugin, libs = done.stdout.splitlines()
    assert values == "[0.0, 1.0, 2.0, 3.0]"
    assert module.startswith(str(package))
    assert plugin.startswith(str(prefix))
    assert libs.startswith("['" + str(prefix)) and libs.count("libgpuplug.so") == 1
