# SPDX-License-Identifier: Apache-2.0
"""pytest plugin (``pytest -p gpuplug.pytest_plugin``): the fixture ``gpuplug_backend``, run
once per backend present, and ``--gpuplug-json FILE``, a record per backend that ``gpuplug
matrix`` merges with ``gpuplug check --json`` records (docs/python.md, "The pytest plugin").

--gpuplug-backends LIST   comma-separated selectors: "host", "cuda:1", "auto"; a plugin name
                          alone is every device of it. Default: GPUPLUG_TEST_BACKENDS, else
                          every device of every plugin discovery finds. A backend that is not
                          usable here is reported as skipped with its reason.
--gpuplug-json FILE       writes the run as `gpuplug check --json` records (schema 1): FILE for
                          one backend, FILE with ".<backend>" before its suffix for each of
                          several. Only tests that use gpuplug_backend are in them.
"""
import json
import os
import re
import time

import pytest

import gpuplug

_KEY = "gpuplug_backend"
_VERDICT_ORDER = ["passed", "skipped", "xfail", "xpass", "failed"]


class _Target:
    """One parameter of gpuplug_backend: a device to create, or why there is none."""

    def __init__(self, id, selector, plugin="", plugin_file="", skip=""):
        self.id, self.selector, self.plugin, self.plugin_file, self.skip = (
            id, selector, plugin, plugin_file, skip)

    def __repr__(self):
        return self.id


class _State:
    def __init__(self, config):
        self.config = config
        self.registry = None
        self.targets = None
        self.started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.cases = {}    # target id -> {case name: [verdict, seconds, message, summary]}
        self.devices = {}  # target id -> device_info()

    def discover(self):
        if self.registry is None:
            self.registry = gpuplug.PluginRegistry()
            self.registry.discover()
        return self.registry

    def resolve(self):
        if self.targets is not None:
            return self.targets
        registry = self.discover()
        plugins = registry.list()
        spec = self.config.getoption("gpuplug_backends") or os.environ.get("GPUPLUG_TEST_BACKENDS", "")
        items = [s.strip() for s in spec.split(",") if s.strip()] or [p["name"] for p in plugins]
        targets = []
        for item in items:
            plain = item.rstrip("!")
            known = [p for p in plugins if p["name"] == plain]
            if known and known[0]["state"] == "available" and known[0]["devices"]:
                p = known[0]
                for d in p["devices"]:
                    targets.append(_Target(f"{p['name']}:{d['ordinal']}", f"{p['name']}:{d['ordinal']}!",
                                           p["name"], p["path"]))
                continue
            if known:
                p = known[0]
                why = p["message"] or p["reason"]
                targets.append(_Target(plain, plain + "!", p["name"], p["path"],
                                       f"{plain}: {p['state']} ({p['reason']}): {why}"))
                continue
            try:  # "auto", "cuda:1", "host:uuid=...": what it would choose
                chosen = registry.dry_run(item if item.endswith("!") or item == "auto" else item + "!")
                name = chosen["chosen"]
                plugin = next((p for p in plugins if name.startswith(p["name"] + ":")), None)
                targets.append(_Target(name, name + "!", plugin["name"] if plugin else "",
                                       plugin["path"] if plugin else ""))
            except gpuplug.Error as e:
                targets.append(_Target(plain, item, skip=str(e)))
        seen, self.targets = set(), []
        for t in targets:  # a device named twice runs once
            if t.id not in seen:
                seen.add(t.id)
                self.targets.append(t)
        return self.targets


def pytest_addoption(parser):
    group = parser.getgroup("gpuplug")
    group.addoption("--gpuplug-backends", dest="gpuplug_backends", default=None, metavar="LIST",
                    help="comma-separated backend selectors for gpuplug_backend (host,cuda:0,...); "
                         "default: GPUPLUG_TEST_BACKENDS, else every plugin discovery finds")
    group.addoption("--gpuplug-json", dest="gpuplug_json", default=None, metavar="FILE",
                    help="write a `gpuplug check --json` record (schema 1) per backend")


_current = []  # the running session's state (a report carries no config)


def pytest_configure(config):
    config._gpuplug_state = _State(config)
    _current.append(config._gpuplug_state)


def pytest_unconfigure(config):
    if getattr(config, "_gpuplug_state", None) in _current:
        _current.remove(config._gpuplug_state)


def pytest_generate_tests(metafunc):
    if _KEY in metafunc.fixturenames:
        targets = metafunc.config._gpuplug_state.resolve()
        metafunc.parametrize(_KEY, targets, ids=[t.id for t in targets], indirect=True)


@pytest.fixture
def gpuplug_backend(request):
    """A GpuBackend of the device this run of the test is for (ids: test_x[host:0]). Made for
    each test and synchronized and released after it."""
    target = request.param
    if target.skip:
        pytest.skip(target.skip)
    state = request.config._gpuplug_state
    gpu = state.discover().create(target.selector)
    if target.id not in state.devices:
        try:
            state.devices[target.id] = gpu.device_info()
        except gpuplug.Error:
            state.devices[target.id] = {}
    with gpu:
        yield gpu


def _case_name(item, target_id):
    stem = os.path.splitext(os.path.basename(str(item.fspath)))[0]
    name = f"{stem}__{getattr(item, 'originalname', item.name) or item.name}"
    params = item.callspec.id if hasattr(item, "callspec") else ""
    rest = [p for p in params.split("-") if p and p != target_id] if params else []
    if rest:
        name += "__" + "_".join(rest)
    return re.sub(r"[^a-z0-9_]", "_", name.lower())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    callspec = getattr(item, "callspec", None)
    target = callspec.params.get(_KEY) if callspec else None
    if isinstance(target, _Target):
        report._gpuplug = (target.id, _case_name(item, target.id))


def pytest_runtest_logreport(report):
    tag = getattr(report, "_gpuplug", None)
    if tag is None:
        return
    state = _current[-1] if _current else None
    if state is None:
        return
    target_id, case = tag
    entry = state.cases.setdefault(target_id, {}).setdefault(case, ["passed", 0.0, "", ""])
    entry[1] += getattr(report, "duration", 0.0) or 0.0
    verdict, message = None, ""
    if hasattr(report, "wasxfail"):
        verdict = "xfail" if report.skipped else "xpass" if report.passed else None
        message = report.wasxfail
    if verdict is None:
        if report.failed:
            verdict, message = "failed", f"{report.when}: {report.longreprtext.strip()}"
        elif report.skipped:
            verdict = "skipped"
            longrepr = report.longrepr
            message = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        else:
            verdict = "passed"
    if _VERDICT_ORDER.index(verdict) > _VERDICT_ORDER.index(entry[0]):
        entry[0] = verdict
        entry[2] = message[-4000:]
        entry[3] = message.splitlines()[-1][:200] if message else ""


def _record(state, target):
    uname = os.uname()
    cases = state.cases.get(target.id, {})
    device = state.devices.get(target.id, {})
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    records = []
    for name, (verdict, seconds, message, summary) in cases.items():
        counts["passed" if verdict == "passed" else
               "failed" if verdict in ("failed", "xpass") else "skipped"] += 1
        records.append({"name": name, "status": verdict, "seconds": round(seconds, 3),
                        "summary": summary, "message": message, "known_failure": ""})
    return {
        "schema": 1,
        "tool": "gpuplug check",
        "gpuplug_version": gpuplug.__version__,
        "abi_version": gpuplug.abi_version,
        "started": state.started,
        "machine": {"hostname": uname.nodename or "unknown", "os": f"{uname.sysname} {uname.release}",
                    "arch": uname.machine},
        # "(pytest)": `gpuplug matrix` refuses the same backend and machine twice, and a
        # `gpuplug check` record of this device is the other column.
        "backend": {"name": f"{target.id} (pytest)", "plugin": target.plugin,
                    "plugin_file": target.plugin_file, "available": not target.skip,
                    "unavailable_reason": target.skip,
                    "device": {"name": device.get("name", ""), "uuid": device.get("uuid", ""),
                               "pci": device.get("pci") or "",
                               "class": device.get("device_class", ""),
                               "driver_version": device.get("driver_version", ""),
                               "runtime_version": device.get("runtime_version", "")}},
        "options": {"isolate": False, "timeout_s": 0},
        "cases": records,
        "summary": counts,
    }


def pytest_sessionfinish(session):
    path = session.config.getoption("gpuplug_json")
    state = getattr(session.config, "_gpuplug_state", None)
    if not path or state is None or state.targets is None:
        return
    targets = state.targets
    for target in targets:
        out = path
        if len(targets) > 1:
            stem, suffix = os.path.splitext(path)
            out = f"{stem}.{re.sub(r'[^A-Za-z0-9_.-]', '_', target.id)}{suffix}"
        with open(out, "w", encoding="utf-8") as f:
            json.dump(_record(state, target), f, indent=2)
            f.write("\n")
