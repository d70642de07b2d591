# SPDX-License-Identifier: Apache-2.0
# gpuplug.pytest_plugin: gpuplug_backend once per backend (an unusable one skipped with its
# reason), --gpuplug-json records valid against check.schema.json that the built `gpuplug matrix`
# merges with a `gpuplug check --json` record; and gpuplug.testing.assert_close's report.
import json
import os
import pathlib
import subprocess
import sys

import numpy
import pytest

from gpuplug.testing import assert_close

SOURCE = pathlib.Path(__file__).resolve().parents[2]
FIVE_LINES = """\
def test_fill(gpuplug_backend):
    buf = gpuplug_backend.alloc(64)
    gpuplug_backend.memset(buf, 7)
    gpuplug_backend.synchronize()
    assert buf.nbytes == 64
"""


def gpuplug_tool():
    tool = os.environ.get("GPUPLUG_TOOL")
    if not tool:
        pytest.skip("GPUPLUG_TOOL (the built gpuplug executable) is not set; CTest sets it")
    return tool


def run_pytest(tmp_path, *args):
    (tmp_path / "test_five.py").write_text(FIVE_LINES)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p",
                           "gpuplug.pytest_plugin", "-v", "-rs", "test_five.py", *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)


def test_backends_ids_skips_and_json_that_matrix_merges(tmp_path):
    done = run_pytest(tmp_path, "--gpuplug-backends", "host,nosuch", "--gpuplug-json", "out.json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "test_five.py::test_fill[host:0] PASSED" in done.stdout
    assert "test_five.py::test_fill[nosuch] SKIPPED" in done.stdout
    assert "unknown backend" in done.stdout  # the reason is reported
    host = json.loads((tmp_path / "out.host_0.json").read_text())
    absent = json.loads((tmp_path / "out.nosuch.json").read_text())
    assert host["backend"]["name"] == "host:0 (pytest)" and host["backend"]["available"]
    assert host["cases"] == [{"name": "test_five__test_fill", "status": "passed", "seconds": host["cases"][0]["seconds"],
                              "summary": "", "message": "", "known_failure": ""}]
    assert host["summary"] == {"passed": 1, "failed": 0, "skipped": 0}
    assert not absent["backend"]["available"] and "unknown backend" in absent["backend"]["unavailable_reason"]
    assert absent["cases"][0]["status"] == "skipped"
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((SOURCE / "tools/gpuplug/check.schema.json").read_text())
    jsonschema.validate(host, schema)
    jsonschema.validate(absent, schema)

    tool = gpuplug_tool()
    check = subprocess.run([tool, "check", "--backend", "host!", "--case", "alloc_copy", "--no-isolate",
                            "--json", str(tmp_path / "check.json")], capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stdout + check.stderr
    merged = subprocess.run([tool, "matrix", str(tmp_path / "check.json"), str(tmp_path / "out.host_0.json"),
                             str(tmp_path / "out.nosuch.json")], capture_output=True, text=True, timeout=120)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    row = [line for line in merged.stdout.splitlines() if line.startswith("test_five__test_fill")]
    assert row and row[0].split()[1:] == ["-", "pass", "skip"], merged.stdout


def test_a_failure_lands_in_the_record(tmp_path):
    (tmp_path / "test_five.py").write_text(FIVE_LINES.replace("== 64", "== 65"))
    failed = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "gpuplug.pytest_plugin",
                             "--gpuplug-backends", "host", "--gpuplug-json", "one.json", "test_five.py"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert failed.returncode == 1
    record = json.loads((tmp_path / "one.json").read_text())  # one backend: the file itself
    assert record["cases"][0]["status"] == "failed" and "65" in record["cases"][0]["message"]
    assert record["summary"]["failed"] == 1


def test_assert_close_reports_the_worst_element():
    assert_close(numpy.array([1.0, 2.0, float("nan")]), [1.0, 2.0 + 1e-9, float("nan")])
    with pytest.raises(AssertionError) as e:
        assert_close(numpy.array([[1.0, 2.0], [3.0, 4.5]]), [[1.0, 2.1], [3.0, 4.0]], rtol=0, atol=0.01)
    text = str(e.value)
    assert "2 of 4 elements" in text and "index (1, 1)" in text and "actual 4.5" in text and "expected 4.0" in text
    with pytest.raises(AssertionError, match="3 elements.*expected 2"):
        assert_close([1, 2, 3], [1, 2])
