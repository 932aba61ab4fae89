"""Shared pytest set-up. The image suite (tests/image) runs only against an image given
with --image (as `invoke build` and `invoke test --image` do); the rest always runs."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Each test phase of an image suite has a time limit (tests/limits.py).
pytest_plugins = ["tests.limits"]


def pytest_addoption(parser):
    parser.addoption("--image", default=None, help="image id or tag for the image suite (tests/image)")
    parser.addoption("--matrix", default=str(ROOT / "matrix.yaml"), help="matrix file the image was built from")
    parser.addoption("--engine-client", default=None, help="container client for the image suite")
    parser.addoption("--engine", default="docker", help="docker or podman: the engine the image is in")


from ascend_build.images.catalog import KINDS  # noqa: E402

IMAGE_SUITES = tuple(kind.suite for kind in KINDS.values())     # one testinfra suite per image kind


def pytest_ignore_collect(collection_path, config):
    if collection_path.name in IMAGE_SUITES and collection_path.parent == ROOT / "tests":
        return not config.getoption("--image")
    return None


def committed_matrix_text() -> str:
    """The committed matrix.yaml as tests start from it: with every bare-.run sha256 a site
    pinned in its checkout (`invoke pin`) reset to null, and no cann_pins, so the unit tests
    do not depend on what was pinned there."""
    import re
    text = re.sub(r"(file: [^,]+\.run, sha256: )[0-9a-f]{64}", r"\1null", (ROOT / "matrix.yaml").read_text())
    return re.sub(r"^cann_pins:\n(  \S+: [0-9a-f]{64}\n)*", "cann_pins: {}\n", text, flags=re.M)


def committed_imported_text() -> str:
    """The committed imported facts (imported.yaml), machine-written by `invoke update`."""
    return (ROOT / "imported.yaml").read_text()


def copy_matrix(folder: Path, text: str | None = None, imported: str | None = None) -> Path:
    """matrix.yaml (`text`, else the committed one as tests start from it) and the imported
    facts it names (`imported`, else the committed ones) written into `folder`; the path of
    the matrix."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "matrix.yaml"
    path.write_text(committed_matrix_text() if text is None else text)
    (folder / "imported.yaml").write_text(committed_imported_text() if imported is None else imported)
    return path


def link_locks(matrix_path: Path) -> Path:
    """A matrix copy finds its locks beside it, as the committed one does (locks/)."""
    link = matrix_path.parent / "locks"
    if not link.exists():
        link.symlink_to(ROOT / "locks", target_is_directory=True)
    return matrix_path


# ------------------------------------------------------------------ lanes and timing
# `invoke test` runs the suite on three workers (pytest-xdist): two lanes of real builds
# side by side, and the unit tests beside them. Each lane is one unit of work
# (pytest_xdist_make_scheduler below), so one worker, and a lane's modules share what its
# session fixtures build; the unit tests are a third unit, so they never wait for the
# lanes. "bookworm": the 2.1.0 Debian 12 image and everything built on or beside it;
# then the MindSpore image and the CANN-only walk (Debian 12, after that lane's first image
# and the podman module: they take their OS steps); "other": the Debian 13 and 11 builders
# and images (a builder shares its OS's first layer with the runtime images, so each OS
# installs its packages once in this lane), the serving image on the Debian 13 one among
# them, and last the 310B image (Debian 12 arm64, on the base the bookworm lane made long
# before). Each lane runs its modules in the order written here, the unlisted ones after
# (by name). Balanced by the module wall times a cold run printed (`invoke test` prints
# them, and each lane's end).
LANES = {
    "bookworm": ("test_build_arm64", "test_user_layer", "test_build_many", "test_registry", "test_act",
                 "test_act_upstream", "test_fast_path", "test_podman", "test_cluster_run", "test_setup_distro_python",
                 "test_python_source", "test_cann_only_walk", "test_upstream"),
    # MindSpore and the newcomer's walk at this lane's end: in a cold run (2026-12-04) the
    # bookworm lane ended 351 s after this one, its last modules alone on the 2 cores. Both
    # take the Debian 12 layers and the 2.1.0 image that lane made long before (once()).
    # (The upstream check, no image, went to the bookworm lane's end: in the next cold run
    # this lane ended 66 s after that one.)
    "other": ("test_source_build_trixie", "test_build_train_26", "test_serving", "test_source_build", "test_310b",
              "test_mindspore", "test_newcomer_walk"),
    "unit": (),
}
DEFAULT_LANE = "other"


def _place(module: str) -> tuple[int, str, int]:
    """(the lane's order, the lane, the position in it) of a test module: by its name, or
    for tests/unit/... the "unit" lane; unlisted modules go last in the default lane."""
    path = Path(module)
    if "unit" in path.parts[:-1]:
        return list(LANES).index("unit"), "unit", 0
    for order, (lane, names) in enumerate(LANES.items()):
        if path.stem in names:
            return order, lane, names.index(path.stem)
    return list(LANES).index(DEFAULT_LANE), DEFAULT_LANE, len(LANES[DEFAULT_LANE])


def lane_of(module: str) -> str:
    return _place(module)[1]


def pytest_collection_modifyitems(session, config, items):
    """The lanes in the order of LANES, each lane's modules in its order (a stable sort:
    tests keep their order within a module, unlisted modules their order by name): the
    scheduler hands the lanes out in that order, the longest first."""
    items.sort(key=lambda item: (_place(item.nodeid.split("::")[0])[0], _place(item.nodeid.split("::")[0])[2]))


# The suite's own images (and builders) are named below this; its debootstrap bases too.
TEST_NAMESPACE = "ascend-build-test/"
KEPT = ("ascend-build-test/debian:",)


def pytest_configure(config):
    """Once per run, before any worker starts: untag the images an earlier run of this
    suite left (its debootstrap bases aside), so that every build here is built (from
    the layer cache when warm) and tested, not taken as an image tested before."""
    config.addinivalue_line("markers", "needs_nnal: an image check that applies where the image has NNAL")
    config.addinivalue_line("markers", "needs_companions: an image check of torch's companions (torchvision)")
    config.addinivalue_line("markers", "needs_apex: an image check of the Ascend apex its label names")
    if os.environ.get("PYTEST_XDIST_WORKER") or not os.environ.get("ASCEND_BUILD_TEST_TIMINGS"):
        return                  # a worker, or not the whole suite (`invoke test` sets this)
    import shutil
    client = next((c for c in ("/usr/bin/docker", shutil.which("docker") or "") if c and os.path.exists(c)), None)
    for exe in filter(None, (client, shutil.which("podman"))):
        out = subprocess.run([exe, "images", "--format", "{{.Repository}}:{{.Tag}}"], capture_output=True, text=True)
        ours = [ref.removeprefix("localhost/") for ref in out.stdout.split() if TEST_NAMESPACE in ref
                and not any(k in ref for k in KEPT)]
        if ours:
            subprocess.run([exe, "rmi", *ours], capture_output=True)


def pytest_xdist_make_scheduler(config, log):
    """Each lane is one unit of work, so one worker runs it whole (xdist's own
    `--dist loadgroup` no longer groups with pytest 9, which ignores the node ids it edits)."""
    from xdist.scheduler import LoadScopeScheduling

    class Lanes(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return lane_of(nodeid.split("::")[0])
    return Lanes(config, log)


def shared_dir(tmp_path_factory) -> Path:
    """A folder every worker of this run sees (xdist gives each worker its own basetemp
    below the run's)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def once(tmp_path_factory, key: str, make):
    """`make()` run once per test run, whichever worker asks first; the others wait for it
    and get what it returned (JSON). For what both lanes need, e.g. a base image."""
    import fcntl
    folder = shared_dir(tmp_path_factory) / "once"
    folder.mkdir(exist_ok=True)
    done = folder / f"{key}.json"
    with open(folder / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return json.loads(done.read_text())
        result = make()
        done.write_text(json.dumps(result))
        return result


_STARTED: dict[str, float] = {}


def pytest_runtest_logstart(nodeid, location):
    _STARTED.setdefault(nodeid.split("::")[0], time.time())


def pytest_runtest_logfinish(nodeid, location):
    module = nodeid.split("::")[0]
    timings = os.environ.get("ASCEND_BUILD_TEST_TIMINGS")
    if timings:
        with open(timings, "a") as fh:
            fh.write(json.dumps({"module": module, "start": _STARTED[module], "end": time.time(),
                                 "worker": os.environ.get("PYTEST_XDIST_WORKER", "-")}) + "\n")


def module_table(path: Path) -> str:
    """Each module's wall time (its first test's start to its last test's end, fixtures
    included) and the worker that ran it; then the run's own wall time."""
    rows: dict[str, dict] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        r = json.loads(line)
        row = rows.setdefault(r["module"], r)
        row["start"], row["end"] = min(row["start"], r["start"]), max(row["end"], r["end"])
    if not rows:
        return ""
    first = min(r["start"] for r in rows.values())
    lines = [f"{'module':<52} {'lane':<9} {'worker':<6} {'from':>7} {'wall':>7}"]
    for r in sorted(rows.values(), key=lambda r: r["start"]):
        lines.append(f"{r['module']:<52} {lane_of(r['module']):<9} {r['worker']:<6} "
                     f"{r['start'] - first:>6.0f}s {r['end'] - r['start']:>6.0f}s")
    for lane in LANES:
        mine = [r for r in rows.values() if lane_of(r["module"]) == lane]
        if mine:
            lines.append(f"{'lane ' + lane + ', its first start to its last end':<52} {lane:<9} {'':<6} "
                         f"{min(r['start'] for r in mine) - first:>6.0f}s "
                         f"{max(r['end'] for r in mine) - min(r['start'] for r in mine):>6.0f}s")
    lines.append(f"{'all modules, first start to last end':<52} {'':<9} {'':<6} {'':>7} "
                 f"{max(r['end'] for r in rows.values()) - first:>6.0f}s")
    return "\n".join(lines)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    # What a test records to be read in the run's output (record_property("shown", text)),
    # e.g. the pipeline's jobs and steps under act; it reaches here from the workers too.
    shown = [value for key in ("passed", "failed") for report in terminalreporter.stats.get(key, [])
             if report.when == "call" for name, value in report.user_properties if name == "shown"]
    if shown:
        terminalreporter.section("shown by the tests")
        for text in shown:
            terminalreporter.write_line(text)
    timings = os.environ.get("ASCEND_BUILD_TEST_TIMINGS")
    if timings and not os.environ.get("PYTEST_XDIST_WORKER"):
        table = module_table(Path(timings))
        if table:
            terminalreporter.section("wall time per module")
            terminalreporter.write_line(table)
            terminalreporter.write_line(machine_calibration())


# The run's wall time means little without the machine's speed (machines of one kind differ
# by up to 1.7x from day to day): benchmarks/emulation.py's measure, on the image the suite
# built first, so every whole run says both figures.
CALIBRATION_IMAGE = "ascend-build-test/runtime:cann8.0.rc3-910b-debian12-py3.11-torch2.1.0-arm64"


def machine_calibration(engine=None, timed: Callable | None = None) -> str:
    """One line: `import torch` under qemu in the suite's 2.1.0 arm64 image with the builds'
    CPU setting (benchmarks/emulation.py --image, one run), or why there is no figure."""
    from ascend_build import engine as eng
    from ascend_build.engine.emulation import QEMU_CPU
    from ascend_build.platforms import PLATFORMS
    if not PLATFORMS["linux/arm64"].emulated():
        return "machine calibration: none (arm64 runs natively here, so nothing is emulated)"
    try:
        engine = engine or eng.detect("docker")
        if engine.image_id(CALIBRATION_IMAGE) is None:
            return f"machine calibration: none ({CALIBRATION_IMAGE} is not in {engine.client}'s store)"
        if timed is None:
            from benchmarks import emulation
            seconds = emulation.timed(engine, CALIBRATION_IMAGE, emulation.IMPORT_TORCH, QEMU_CPU)
        else:
            seconds = timed(engine, CALIBRATION_IMAGE)
    except (Exception, SystemExit) as exc:        # a figure, never the run's verdict
        return f"machine calibration: none ({exc})"
    return (f"machine calibration: `import torch` under qemu (QEMU_CPU={QEMU_CPU}, one run, container start "
            f"included) in {CALIBRATION_IMAGE}: {seconds:.1f} s (benchmarks/emulation.py --image measures the same)")


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


# ------------------------------------------------------------------ skips under CI
# With CI=true a skip fails the run (the hook below), whatever suite it is in (the unit and
# integration tests, and the image suites the gate runs on every candidate), unless only
# hardware this machine lacks explains it. Each allowed reason is the start of a skip's
# message, with why it cannot run on a CI machine here. A check that does not apply to an
# image (a torch check on a MindSpore image) is not skipped: the image suites leave it out
# at collection (tests/image/conftest.py), and pytest says so ("deselected"). An xfail
# fails under CI too, whether it failed as expected or passed: either way it checked
# nothing, and no hardware explains it (a test that needs a card skips for it).
ALLOWED_SKIPS = {
    "no /dev/davinciN on this host": "an Ascend NPU: the smoke tests put a tensor on a card, and no CI machine has one",
    "the fast path is for cross-arch builds": "a build machine of another arch than the image's (an x86_64 machine "
                                              "for an arm64 image): on an aarch64 machine there is nothing to compare",
}


def allowed_skip(reason: str) -> bool:
    reason = reason.removeprefix("Skipped: ")
    return any(reason.startswith(start) for start in ALLOWED_SKIPS)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not in_ci():
        return
    if hasattr(report, "wasxfail"):
        how = "passed" if report.passed else "failed as expected"
        reason = report.wasxfail or "no reason given"
        del report.wasxfail             # else pytest still counts it as xfailed or xpassed
        report.outcome = "failed"
        report.longrepr = (f"CI=true: this test is marked xfail ({reason}) and {how}. Under CI an xfail fails: "
                           f"make the test pass, or, if only missing hardware stops it, skip it with a reason in "
                           f"ALLOWED_SKIPS")
        return
    if not report.skipped:
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if not allowed_skip(reason):
        report.outcome = "failed"
        report.longrepr = (f"CI=true: this test skipped ({reason}). Under CI a skip fails unless missing hardware "
                           f"explains it (tests/conftest.py ALLOWED_SKIPS); make the test run here, or say in "
                           f"ALLOWED_SKIPS which hardware it needs")


def missing_tool(what: str) -> None:
    """A test needs a tool `scripts/bootstrap.sh` installs (a cross compiler, an engine
    plugin): it skips with that reason on a checkout where only scripts/python-env.sh ran;
    with CI=true it fails, as a missing engine does."""
    message = f"{what} is not installed here (scripts/bootstrap.sh installs it)"
    if in_ci():
        pytest.fail(f"CI=true but {message}")
    pytest.skip(message)


def usable_engine(kind: str):
    """A running engine of this kind. On a laptop without one the engine tests skip; with
    CI=true a missing engine fails them."""
    from ascend_build import engine as eng
    from ascend_build.errors import EngineError
    try:
        return eng.detect(kind)
    except EngineError as exc:
        if in_ci():
            pytest.fail(f"CI=true but no usable {kind} engine: {exc}")
        pytest.skip(f"no usable {kind} engine: {exc}")


@pytest.fixture(scope="session")
def engine():
    """A running, BuildKit-capable docker engine."""
    return usable_engine("docker")


# ---------------------------------------------------------------- image suites (--image)
# Shared by tests/image (runtime) and tests/builder_image: one container per module.

@pytest.fixture(scope="session")
def suite_engine(pytestconfig):
    from ascend_build import engine as eng
    engine = eng.detect(pytestconfig.getoption("--engine"), pytestconfig.getoption("--engine-client"))
    # testinfra's docker and podman backends call the client from PATH: make it this one.
    os.environ["PATH"] = os.path.dirname(os.path.abspath(engine.client)) + os.pathsep + os.environ["PATH"]
    return engine


@pytest.fixture(scope="session")
def client(suite_engine) -> str:
    return suite_engine.client


@pytest.fixture(scope="session")
def image(pytestconfig) -> str:
    return pytestconfig.getoption("--image")


@pytest.fixture(scope="session")
def inspect(client, image) -> dict:
    out = subprocess.run([client, "image", "inspect", image], capture_output=True, text=True)
    assert out.returncode == 0, f"image {image} not found: {out.stderr}"
    return json.loads(out.stdout)[0]


@pytest.fixture(scope="session")
def labels(inspect) -> dict[str, str]:
    return inspect["Config"].get("Labels") or {}


def label(labels: dict[str, str], key: str) -> str:
    from ascend_build.images.kinds import LABEL_PREFIX
    full = f"{LABEL_PREFIX}.{key}"
    assert full in labels, f"image lacks the label {full} that ties it to the matrix"
    return labels[full]


@pytest.fixture(scope="session")
def image_env(inspect) -> dict[str, str]:
    return dict(item.split("=", 1) for item in inspect["Config"]["Env"])


@pytest.fixture(scope="session")
def platform(labels) -> str:
    return label(labels, "platform")


@pytest.fixture(scope="module")
def host(client, suite_engine, image, platform):
    """A container of the image, kept running for the module, as a testinfra host."""
    import testinfra

    from ascend_build.engine import RunSpec
    started = suite_engine.run_container(RunSpec(image, ("infinity",), platform=platform, entrypoint="sleep",
                                                 detach=True), timeout=300)
    assert started.returncode == 0, started.stderr
    cid = started.stdout.strip()
    try:
        yield testinfra.get_host(f"{suite_engine.testinfra_backend}://{cid}")
    finally:
        subprocess.run([client, "rm", "-f", cid], capture_output=True)


# What the image's Python says of itself and of what is installed, in one start: under qemu
# every start of the image's Python costs seconds, and a suite asked this five to seven
# times (and `pip show` once more). Read without importing any package.
_DISTRIBUTIONS = ("import json, site, sys, importlib.metadata as m; print(json.dumps({"
                  "'python': '%d.%d' % sys.version_info[:2], "
                  "'all': [[d.metadata['Name'], d.version] for d in m.distributions()], "
                  "'site': [[d.metadata['Name'], d.version] for d in m.distributions(path=site.getsitepackages())]}))")


@dataclass(frozen=True)
class Distributions:
    """The image's Python version and its distributions: `every` on its whole path (what
    `import` and `pip show` see), `site` in its site-packages only, each (name, version) as
    its metadata spells it, one entry per .dist-info (a project there twice is there twice)."""
    python: str
    every: tuple[tuple[str, str], ...]
    site: tuple[tuple[str, str], ...]

    def versions(self, key: Callable[[str], str], *, site: bool = False) -> dict[str, str]:
        """key(name) -> version: every distribution, or (site) those in site-packages."""
        return {key(name): version for name, version in (self.site if site else self.every)}


@pytest.fixture(scope="module")
def distributions(host) -> Distributions:
    out = host.run("python -c " + shlex.quote(_DISTRIBUTIONS))
    assert out.rc == 0, out.stderr
    found = json.loads(out.stdout)
    return Distributions(found["python"], tuple(map(tuple, found["all"])), tuple(map(tuple, found["site"])))


# A container of the image suite that runs longer than this is stopped and its test fails
# (a Python that hangs at import, say): a suite never waits for ever. Under qemu on 2 cores
# `import torch` takes about a minute.
CONTAINER_TIMEOUT = 900


@pytest.fixture(scope="session")
def docker_run(suite_engine, image, platform):
    """`docker run --rm IMAGE ARGS...`: no login shell, no profile, only image ENV."""
    from ascend_build.engine import RunSpec

    def run(*args: str) -> subprocess.CompletedProcess:
        done = suite_engine.run_container(RunSpec(image, tuple(args), platform=platform), timeout=CONTAINER_TIMEOUT)
        assert done.returncode != 124 or "did not end within" not in done.stderr, \
            f"`{' '.join(args)[:200]}` in {image} {done.stderr}"
        return done
    return run
