"""The product's core promise, tested in milliseconds against the engine double
(tests/doubles/engine_double.py): nothing is tagged until its suite passed, every tag is
set when it did, a tested image with the same content tag is reused without a build (and
tested again with --retest), `build --all` goes on past a failed cell and says so, Ctrl-C
at any step tags nothing and leaves nothing behind, `push` skips content the registry has
and refuses a test-only image, and `verify` ends with the code the README gives.

The real path (a real engine, the real suite) is proven once per image kind in
tests/integration; what is here is the logic between them: images/steps.py, build.py,
batch.py, registry.py and verify.py, as the tasks call them."""
from __future__ import annotations

import dataclasses
import os
import signal
from pathlib import Path

import pytest
from invoke import Exit

from ascend_build.cli.wrap import user_errors
from ascend_build.engine import Engine, RunSpec, interrupts
from ascend_build.errors import CODE, BuildFailed, Differs, UserError
from ascend_build.errors import TestsFailed as SuiteFailed
from ascend_build.images import batch, registry, steps, verify
from ascend_build.images import build as runtime_build
from ascend_build.images.kinds import label
from ascend_build.inputs.options import Inputs
from ascend_build.matrix import load_matrix
from tests.conftest import copy_matrix
from tests.doubles.engine_double import EngineDouble
from tests.doubles.suite_double import SuiteDouble

STACK = dict(stack="2.1.0", os="debian12", python="3.11", platform="linux/arm64")
BASE = "debian:bookworm"


def test_push_takes_a_serving_image_by_its_suffix_and_refuses_one_without_kernels_unless_told(matrix, site, engine):
    """A serving image is tagged <runtime name>-vllm<release>-<arch> (serving.suffix_of): push
    takes it by that name, with no alias; one built --no-kernels only with --without-kernels-ok."""
    built = build(matrix, site, engine, SuiteDouble(0))
    cell = matrix.cell(**STACK)
    local = f"ascend-runtime:{cell.tag_name}-vllm0.23.0-arm64"
    served = engine.relabel(built.image_id, {label("kind"): "serving", label("kernels"): "no"})
    engine.tag(served, local)
    with pytest.raises(UserError, match="built without vLLM-Ascend's custom kernels .*--without-kernels-ok"):
        registry.push(engine, [cell], "ascend-runtime", "127.0.0.1:5000/ascend", suffix="-vllm0.23.0")
    assert engine.called("push") == []
    report = registry.push(engine, [cell], "ascend-runtime", "127.0.0.1:5000/ascend", suffix="-vllm0.23.0",
                           without_kernels_ok=True)
    assert f"127.0.0.1:5000/ascend:{cell.tag_name}-vllm0.23.0-arm64" in report.pushed
    assert report.lists == [f"127.0.0.1:5000/ascend:{cell.tag_name}-vllm0.23.0"]
    assert not any(cell.alias_name and p.endswith(f":{cell.alias_name}-arm64") for p in report.pushed)


@pytest.fixture
def engine() -> EngineDouble:
    double = EngineDouble()
    double.add(BASE, platform="linux/arm64")       # the image's base (and, on the fast path, the build machine's)
    return double


def build(matrix, site, engine, suite, **cell):
    return runtime_build.build(matrix, matrix.cell(**{**STACK, **cell}), site, Inputs(repository="ascend-runtime"),
                               engine, suite)


def plan_tags(matrix, site, engine, **cell):
    p = runtime_build.prepare(matrix, matrix.cell(**{**STACK, **cell}), site, Inputs(repository="ascend-runtime"),
                              engine)
    return list(p.plan.tags)


def test_a_passing_suite_tags_every_tag_on_the_image_it_tested(matrix, site, engine):
    suite = SuiteDouble(0)
    built = build(matrix, site, engine, suite)
    tags = list(built.tags)
    assert len(tags) >= 2 and all(engine.tags.get(t) == built.image_id for t in tags)
    assert suite.ran == [built.image_id], "the suite ran once, on the image that was then tagged"
    # The tagged image is the finished one: the project's files are its last layer.
    assert engine.images[built.image_id].config["config"]["Labels"][label("content-tag")] == built.content_tag
    assert engine.untagged() == set(), "the candidate before the project's files was removed"


def test_the_finished_image_has_the_login_profile_of_its_own_env(matrix, site, engine):
    """The project's files (the last layer, tested with the image) include the profile script
    that gives a login shell the image's ENV back, written from the candidate's ENV."""
    import io
    import tarfile

    from ascend_build.images.finish import PROFILE, profile_text
    built = build(matrix, site, engine, SuiteDouble(0))
    image = engine.images[built.image_id]
    with tarfile.open(fileobj=io.BytesIO(image.layers[-1])) as tar:
        written = tar.extractfile(PROFILE.lstrip("/")).read().decode()
    env = image.config["config"]["Env"]
    assert env and written == profile_text(env)
    assert "_ascend_build_rest=/usr/bin:/bin:" in written, written


def test_a_dry_run_says_the_debian_base_is_missing_and_what_makes_it(matrix, site, capsys):
    """Only the real run said it (exit 6, after the plan looked fine): the dry run names each
    base the engine lacks and what makes it here; nothing when the base is there, or when
    --debootstrap makes it (its own lines say so)."""
    dry = dataclasses.replace(site, dry=True)
    build(matrix, dry, EngineDouble(), SuiteDouble(0))
    said = capsys.readouterr().out
    assert f"# base image {BASE} (linux/arm64) is not in the engine: the real run pulls it first, and stops there " \
           "(exit 6) where no registry serves it." in said
    assert "add --debootstrap" in said and f"--base-image {BASE}=MIRROR/" in said
    here = EngineDouble()
    here.add(BASE, platform="linux/arm64")
    build(matrix, dry, here, SuiteDouble(0))
    assert "is not in the engine" not in capsys.readouterr().out
    build(matrix, dataclasses.replace(dry, debootstrap=True), EngineDouble(), SuiteDouble(0))
    assert "is not in the engine" not in capsys.readouterr().out


def test_a_failing_suite_tags_nothing_and_removes_what_it_built(matrix, site, engine):
    suite = SuiteDouble(1)
    with pytest.raises(SuiteFailed, match="nothing was tagged and the image was removed"):
        build(matrix, site, engine, suite)
    tags = plan_tags(matrix, site, engine)
    assert not any(t in engine.tags for t in tags)
    assert engine.untagged() == set(), "no candidate left behind"
    assert len(suite.ran) == 1


def test_keep_failed_keeps_the_untagged_candidate_to_debug(matrix, site, engine):
    with pytest.raises(SuiteFailed, match="It is kept") as kept:
        build(matrix, dataclasses.replace(site, keep_failed=True), engine, SuiteDouble(1))
    image = str(kept.value).split("image tests failed for ")[1].split()[0]
    assert image in engine.untagged() and not any(t in engine.tags for t in plan_tags(matrix, site, engine))


def test_a_failed_build_tags_nothing_and_runs_no_suite(matrix, site, packages, tmp_path):
    engine = EngineDouble(fail_build=lambda req: True)
    engine.add(BASE)
    suite = SuiteDouble(0)
    with pytest.raises(BuildFailed, match="nothing was tagged"):
        build(matrix, site, engine, suite)
    assert suite.ran == [] and engine.tags == {BASE: engine.tags[BASE]}


def test_a_tested_image_is_reused_without_a_build_and_retest_runs_its_suite(matrix, site, engine):
    first = build(matrix, site, engine, SuiteDouble(0))
    builds = len(engine.called("build"))
    suite = SuiteDouble(0)
    again = build(matrix, site, engine, suite)
    assert again.image_id == first.image_id
    # Its log says so, beside the first build's log, which stays (CI uploads both kinds).
    assert again.log.name == "reused.log" and first.log.is_file() and again.log.parent == first.log.parent
    assert "nothing built" in again.log.read_text() and first.tags.content in again.log.read_text()
    assert len(engine.called("build")) == builds and suite.ran == [], "no build, no suite: reused as tested"
    # --retest: the suite runs on it again; passing, it keeps its tags.
    suite = SuiteDouble(0)
    build(matrix, dataclasses.replace(site, retest=True), engine, suite)
    assert suite.ran == [first.image_id] and len(engine.called("build")) == builds
    # Failing again, its tags are taken away.
    with pytest.raises(SuiteFailed, match=r"failed its suite again \(the suite ended with exit 1: tests failed\); "
                                          r"its tags were removed$"):
        build(matrix, dataclasses.replace(site, retest=True), engine, SuiteDouble(1))
    assert not any(t in engine.tags for t in first.tags)


def test_no_cache_builds_again_and_tests_before_moving_the_tags(matrix, site, engine, capsys):
    first = build(matrix, site, engine, SuiteDouble(0))
    capsys.readouterr()
    suite = SuiteDouble(0)
    again = build(matrix, dataclasses.replace(site, no_cache=True), engine, suite)
    assert again.image_id != first.image_id, "every step again: the double writes its clock into the layer"
    assert suite.ran == [again.image_id] and all(engine.tags[t] == again.image_id for t in again.tags)
    assert first.image_id not in engine.images, "the image the tags moved away from is gone"
    said = capsys.readouterr()
    readable = next(t for t in again.tags if "sha-" not in t)
    assert f"{readable} moved from {first.image_id[:19]} to {again.image_id[:19]}" in said.out + said.err


def test_an_image_under_the_content_tag_that_is_not_ours_is_not_reused(matrix, site, engine):
    """A content tag pointing at an image whose label says another content (moved by hand):
    built and tested, not taken."""
    tags = plan_tags(matrix, site, engine)
    engine.add(tags[1] if tags[1].split(":")[1].startswith("sha-") else tags[0], labels={label("content-tag"): "x"})
    suite = SuiteDouble(0)
    built = build(matrix, site, engine, suite)
    assert suite.ran == [built.image_id]


def test_build_all_goes_on_past_a_failed_cell_and_reports_it(matrix, site, engine):
    cells = [matrix.cell("2.1.0", "ubuntu22.04", "3.10", None, "linux/arm64"), matrix.cell(**STACK)]
    outcomes = batch.build_many(matrix, cells, site, Inputs(repository="ascend-runtime"), engine, SuiteDouble(0))
    assert [o.status for o in outcomes] == ["failed", "tagged"]
    assert "base image ubuntu:22.04 is not here and cannot be pulled" in outcomes[0].detail
    assert "ubuntu" not in " ".join(engine.called("build")), "the failed cell was refused before its build"
    # The summary is a table, a row per cell in the order built: each row's image, platform and status.
    head, rule, *rows = batch.summary(outcomes).splitlines()
    assert head.split() == ["image", "platform", "status", "log", "detail"] and set(rule) <= {"-", " "}
    assert [row.split()[:3] for row in rows] == [[o.image, "linux/arm64", o.status] for o in outcomes]
    assert rows[0].split()[2] == "failed" and "base image ubuntu:22.04 is not here" in rows[0]


@pytest.fixture(scope="module")
def unlocked_matrix(tmp_path_factory):
    """A copy elsewhere, no locks beside it, whose 2.1.0 asks for other numpys than the
    project's lock was made from: its cells have no lock."""
    from tests.conftest import committed_matrix_text
    text = committed_matrix_text().replace('numpy: "<2"}      # new protobuf', 'numpy: "<1.26"}  #', 1)
    assert text != committed_matrix_text()
    return load_matrix(copy_matrix(tmp_path_factory.mktemp("unlocked"), text))


def test_a_cell_without_a_lock_is_refused_before_the_engine_unless_unlocked(unlocked_matrix, site, engine, capsys):
    before, suite = dict(engine.tags), SuiteDouble(0)
    with pytest.raises(UserError) as refused:
        build(unlocked_matrix, site, engine, suite)
    assert refused.value.exit_code == 2 and not isinstance(refused.value, BuildFailed)
    assert str(refused.value).startswith("stack 2.1.0 / Python 3.11 / aarch64 has no lock (none in ")
    assert "--unlocked builds it without one" in str(refused.value)
    assert engine.calls == [] and engine.tags == before and suite.ran == [], "nothing built, tested or tagged"
    built = build(unlocked_matrix, dataclasses.replace(site, unlocked=True), engine, suite)
    assert suite.ran == [built.image_id] and all(engine.tags.get(t) == built.image_id for t in built.tags)
    assert engine.labels(built.image_id)[label("lock")] == "none"
    said = capsys.readouterr()
    assert "WARNING: stack 2.1.0 / Python 3.11 / aarch64 has no lock: pip resolves its Python packages" in said.err
    assert "python packages: unlocked (--unlocked)" in said.out


def test_verify_rebuilds_an_unlocked_image_unlocked_as_its_label_says(unlocked_matrix, site, engine):
    """`invoke verify` has no --unlocked: the image's lock label (none) decides."""
    built = build(unlocked_matrix, dataclasses.replace(site, unlocked=True, epoch=1700000000), engine, SuiteDouble(0))
    lines = verify.verify(unlocked_matrix, built.tags.readable, site, Inputs(), engine)
    assert any(line.startswith("image ID: the same") for line in lines), lines


def test_build_all_fails_the_row_of_a_cell_without_a_lock_and_builds_the_others(matrix, site, engine):
    cells = [matrix.cell(**{**STACK, "platform": "linux/amd64"}), matrix.cell(**STACK)]   # no x86_64 locks
    outcomes = batch.build_many(matrix, cells, site, Inputs(repository="ascend-runtime"), engine, SuiteDouble(0))
    assert [o.status for o in outcomes] == ["failed", "tagged"]
    assert outcomes[0].detail.startswith("stack 2.1.0 / Python 3.11 / x86_64 has no lock")
    assert not any(t.endswith("-amd64") for t in engine.tags), "the refused cell tagged nothing"


@pytest.fixture
def ctrl_c():
    interrupts.install()
    yield
    interrupts.uninstall()
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _calls_of_a_whole_build(matrix, site, packages, tmp_path) -> int:
    engine = EngineDouble()
    engine.add(BASE)
    build(matrix, dataclasses.replace(site, work=tmp_path / "count"), engine, SuiteDouble(0))
    return len(engine.calls)


def test_ctrl_c_at_each_step_tags_nothing_and_leaves_nothing(matrix, site, packages, tmp_path, ctrl_c):
    """SIGINT at every engine call of a build in turn (and during its suite): the build ends
    as an interrupt; every tag is set or none (tagging is all or nothing), and a tag is
    only ever set once the suite passed; no untagged image is left."""
    total = _calls_of_a_whole_build(matrix, site, packages, tmp_path)
    assert total > 10
    outcomes = {}
    for n in range(1, total + 1):
        engine = EngineDouble(interrupt_at=n + 1)       # the first call is the base image's add below
        engine.add(BASE)
        suite = SuiteDouble(0)
        tags = plan_tags(matrix, site, EngineDouble())
        try:
            build(matrix, dataclasses.replace(site, work=tmp_path / f"n{n}"), engine, suite)
            outcomes[n] = "done"
        except interrupts.Interrupted:
            outcomes[n] = "interrupted"
        finally:
            interrupts.uninstall()
            interrupts.install()
        set_tags = [t for t in tags if t in engine.tags]
        assert set_tags in ([], tags), f"call {n} ({engine.calls[n - 1]}): some tags set, not all: {set_tags}"
        if set_tags:
            assert suite.ran, f"call {n}: tagged without a suite run"
        assert engine.untagged() == set(), f"call {n} ({engine.calls[n - 1]}): left {engine.untagged()}"
    assert "interrupted" in outcomes.values()


def test_ctrl_c_during_the_suite_tags_nothing_and_removes_the_candidate(matrix, site, engine, ctrl_c):
    def interrupted_suite(image, matrix_path, engine):
        interrupts.stop()
    with pytest.raises(interrupts.Interrupted):
        build(matrix, site, engine, interrupted_suite)
    assert not any(t in engine.tags for t in plan_tags(matrix, site, engine))
    assert engine.untagged() == set()


def test_push_skips_content_the_registry_has(matrix, site, engine):
    built = build(matrix, site, engine, SuiteDouble(0))
    cell = matrix.cell(**STACK)
    first = registry.push(engine, [cell], "ascend-runtime", "127.0.0.1:5000/ascend")
    assert first.pushed and not first.skipped
    pushes = len(engine.called("push"))
    again = registry.push(engine, [cell], "ascend-runtime", "127.0.0.1:5000/ascend")
    assert again.skipped and not again.pushed and len(engine.called("push")) == pushes
    assert again.lists == [f"127.0.0.1:5000/ascend:{cell.tag_name}"]
    assert engine.registry[f"127.0.0.1:5000/ascend:{cell.tag_name}"][0].image == built.image_id


def test_push_and_join_refuse_a_test_only_image(matrix, site, engine):
    built = build(matrix, site, engine, SuiteDouble(0))
    cell = matrix.cell(**STACK)
    image = engine.relabel(built.image_id, {label("test-only"): "torch from PyPI (switch): not an image to ship"})
    with pytest.raises(UserError, match=f"carries the label {label('test-only')}"):
        registry.push(engine, [cell], "ascend-runtime", "127.0.0.1:5000/ascend")
    assert engine.called("push") == []
    # A site's registry holding it (pushed by hand): join refuses it too.
    remote = f"127.0.0.1:5000/ascend:{cell.tag_name}-arm64"
    engine.tag(image, remote)
    engine.push(remote, "127.0.0.1:5000")
    with pytest.raises(UserError, match=label("test-only")):
        registry.join_all(engine, [cell], "127.0.0.1:5000/ascend")


@pytest.fixture
def reproducible(matrix, site, engine):
    """A --reproducible build of the cell, tested and tagged."""
    site = dataclasses.replace(site, epoch=1700000000)
    return site, build(matrix, site, engine, SuiteDouble(0))


def test_verify_of_the_same_inputs_is_the_same_image(matrix, reproducible, engine):
    site, built = reproducible
    lines = verify.verify(matrix, built.tags.readable, site, Inputs(), engine)
    assert any(line.startswith("image ID: the same") for line in lines), lines
    assert built.image_id in engine.images and engine.untagged() == set(), "the rebuild was removed"


def test_verify_names_a_difference_with_exit_7(matrix, reproducible, engine):
    site, built = reproducible
    engine.interrupt_at = None
    real_build = engine.build

    def nondeterministic(req, log=None, show_line=None):     # an engine that writes its clock anyway
        return real_build(dataclasses.replace(req, epoch=None), log, show_line)
    engine.build = nondeterministic                             # type: ignore[method-assign]
    with pytest.raises(Differs) as found:
        verify.verify(matrix, built.tags.readable, site, Inputs(), engine)
    assert Differs.exit_code == CODE[7].code == 7 and "DIFFERS" in str(found.value)
    assert engine.untagged() == set(), "the differing rebuild is not kept (and never tagged)"


def test_verify_refuses_what_it_cannot_check_with_exit_2(matrix, site, engine):
    built = build(matrix, site, engine, SuiteDouble(0))           # not --reproducible
    with pytest.raises(UserError, match="was not built with --reproducible"):
        verify.verify(matrix, built.tags.readable, site, Inputs(), engine)
    with pytest.raises(UserError, match="no image nowhere/missing:1"):
        verify.verify(matrix, "nowhere/missing:1", site, Inputs(), engine)
    assert UserError.exit_code == CODE[2].code == 2


def test_verify_rebuilds_on_the_base_the_image_records(matrix, site, engine, capsys):
    """The first hour's finding: an image built with --debootstrap was verified against the
    matrix's base (debian:bookworm), made another content tag, and verify blamed the
    checkout. The label org.opencontainers.image.base.name now decides, with no option."""
    for arch in ("arm64", "amd64"):      # the image's and the build machine's, as --debootstrap made them
        engine.add(f"ascend-build/debian:bookworm-{arch}", platform=f"linux/{arch}")
    made = dataclasses.replace(site, epoch=1700000000, debootstrap=True)
    built = build(matrix, made, engine, SuiteDouble(0))
    assert engine.labels(built.image_id)["org.opencontainers.image.base.name"] == "ascend-build/debian:bookworm-arm64"
    capsys.readouterr()
    plain = dataclasses.replace(site, epoch=None)       # what `invoke verify --image` alone gives
    lines = verify.verify(matrix, built.tags.readable, plain, Inputs(), engine)
    assert any(line.startswith("image ID: the same") for line in lines), lines
    assert "base image: ascend-build/debian:bookworm-arm64, as the image's label records" in capsys.readouterr().out
    # A base given that is not the recorded one: the message names both.
    other = dataclasses.replace(plain, base_images={BASE: "mirror.example/debian:bookworm"})
    engine.add("mirror.example/debian:bookworm", platform="linux/arm64")
    with pytest.raises(UserError, match="another base image: the image records ascend-build/debian:bookworm-arm64, "
                                        "here mirror.example/debian:bookworm"):
        verify.verify(matrix, built.tags.readable, other, Inputs(), engine)


def test_a_base_made_by_debootstrap_is_found_again_by_a_build_without_the_flag(matrix, site, capsys):
    """The first hour: after `--debootstrap` made ascend-build/debian:bookworm-arm64, the next
    build without the flag (docs/mindspore.md's command) ended with exit 6, "add --debootstrap",
    the base sitting right there. Now it takes it, says so, and is the same image (reused)."""
    engine = EngineDouble()             # no debian:bookworm here: no registry, as on such a site
    for arch in ("arm64", "amd64"):
        engine.add(f"ascend-build/debian:bookworm-{arch}", platform=f"linux/{arch}")
    first = build(matrix, dataclasses.replace(site, debootstrap=True), engine, SuiteDouble(0))
    capsys.readouterr()
    again = build(matrix, site, engine, SuiteDouble(0))
    said = capsys.readouterr()
    assert "base: ascend-build/debian:bookworm-arm64 (made here by an earlier --debootstrap; debian:bookworm " \
           "is not in the engine)" in said.out + said.err
    assert again.content_tag == first.content_tag and again.image_id == first.image_id
    # Where the matrix's base is in the engine, that one is taken, as before.
    engine.add(BASE, platform="linux/arm64")
    own = build(matrix, site, engine, SuiteDouble(0))
    assert own.content_tag != first.content_tag
    assert engine.labels(own.image_id)["org.opencontainers.image.base.name"] == BASE


def test_verify_finds_the_packages_the_build_was_given_without_the_option(matrix, reproducible, engine):
    """The first hour's `invoke verify --image` failed with exit 3 until --packages was given
    again: the build now keeps the .run files it was given in the cache, by sum."""
    site, built = reproducible
    plain = dataclasses.replace(site, packages=(), epoch=None)
    lines = verify.verify(matrix, built.tags.readable, plain, Inputs(), engine)
    assert any(line.startswith("image ID: the same") for line in lines), lines


# ------------------------------------------------------------------ the suite's exit, through the real runner
# The gate's own suite command (steps.run_image_tests: `python -m pytest tests/image ...`,
# run by engine/runner.py) finds the suite double as its pytest, and ends as told. Only 0
# tags; pytest's 1 to 5 and a death by a signal fail the build (exit 5, README's table),
# an interrupt ends it as one (130); either way nothing is tagged and nothing is left.
SUITE_DOUBLE = Path(__file__).resolve().parents[1] / "doubles" / "suite_double.py"


@pytest.fixture
def suite_ends(tmp_path, monkeypatch):
    """`suite_ends(end)`: how the image suite the gate starts ends ("5", "signal:9")."""
    folder = tmp_path / "suite-double"
    folder.mkdir()
    (folder / "pytest.py").symlink_to(SUITE_DOUBLE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")])))
    return lambda end: monkeypatch.setenv("SUITE_DOUBLE_END", end)


def exit_code(action) -> int:
    """The code a task whose action is `action` ends with (cli/wrap.py: its errors into codes)."""
    try:
        user_errors(action)()
    except Exit as ended:
        return ended.code
    return 0


def suite_ran_on(out: str) -> str:
    """The image the suite double was run on (its --image), once, on the runtime suite."""
    runs = [line for line in out.splitlines() if line.startswith("suite double: ")]
    assert len(runs) == 1 and f"{os.sep}tests{os.sep}image " in runs[0], out[-2000:]
    return runs[0].split(" --image ")[1].split()[0]


def test_a_suite_that_exits_0_tags_the_image_it_ran_on(matrix, site, engine, suite_ends, capfd):
    suite_ends("0")
    built: list = []
    assert exit_code(lambda: built.append(build(matrix, site, engine, None))) == 0
    assert suite_ran_on(capfd.readouterr().out) == built[0].image_id
    assert all(engine.tags.get(t) == built[0].image_id for t in built[0].tags) and engine.untagged() == set()


@pytest.mark.parametrize("end, said", [
    ("1", "the suite ended with exit 1: tests failed"),
    ("2", "the suite ended with exit 2: interrupted, or an error while collecting"),
    ("3", "the suite ended with exit 3: pytest's internal error"),
    ("4", "the suite ended with exit 4: pytest's usage error"),
    ("5", "the suite ended with exit 5: no tests were collected"),
    ("signal:9", "the suite was killed by SIGKILL"),
    ("137", "the suite ended with exit 137: 128 + SIGKILL"),
    ("signal:15", "the suite was killed by SIGTERM"),
])
def test_any_other_end_of_the_suite_tags_nothing_removes_the_image_and_exits_5(matrix, site, engine, suite_ends,
                                                                                 capfd, end, said):
    suite_ends(end)
    assert exit_code(lambda: build(matrix, site, engine, None)) == CODE[5].code == 5
    out = capfd.readouterr()
    image = suite_ran_on(out.out)
    assert f"error: image tests failed for {image} (" in out.err and f"; {said}); nothing was tagged and the image " \
                                                                 f"was removed" in out.err, out.err[-2000:]
    assert image not in engine.images and engine.untagged() == set(), "the failed image and its candidate are gone"
    assert not any(t in engine.tags for t in plan_tags(matrix, site, engine))


@pytest.mark.parametrize("end", ["signal:2", "130"])
def test_a_suite_ended_by_ctrl_c_ends_the_build_as_an_interrupt(matrix, site, engine, suite_ends, capfd, end):
    """Killed by SIGINT, or 130 as a shell reports that: exit 130, nothing tagged, nothing left."""
    suite_ends(end)
    assert exit_code(lambda: build(matrix, site, engine, None)) == CODE[130].code == 130
    out = capfd.readouterr()
    assert suite_ran_on(out.out) not in engine.images and "interrupted: nothing was tagged" in out.err
    assert engine.untagged() == set() and not any(t in engine.tags for t in plan_tags(matrix, site, engine))


# ------------------------------------------------------------------ an image a container uses
@pytest.mark.parametrize("running", [True, False])
def test_the_engine_double_refuses_to_remove_an_image_a_container_uses_as_docker_does(running):
    engine = EngineDouble()
    image = engine.add("ascend-runtime:x")
    short = image.removeprefix("sha256:")[:12]
    job = engine.add_container("ascend-runtime:x", running=running)
    assert engine.containers_of("ascend-runtime:x") == [job]
    assert not engine.remove("ascend-runtime:x") and engine.tags["ascend-runtime:x"] == image
    assert engine.refusals == [f'Error response from daemon: conflict: unable to remove repository reference '
                               f'"ascend-runtime:x" (must force) - container {job[:12]} is using its referenced '
                               f'image {short}']
    engine.tag(image, "ascend-runtime:y")       # not its last tag: untagged, the image stays
    assert engine.remove("ascend-runtime:x") and engine.tags["ascend-runtime:y"] == image
    del engine.tags["ascend-runtime:y"]         # untagged, as a failed candidate is
    state = "running" if running else "stopped"
    must = "cannot be forced" if running else "must be forced"
    assert not engine.remove(image) and image in engine.images
    assert engine.refusals[-1] == (f"Error response from daemon: conflict: unable to delete {short} ({must}) - "
                                   f"image is being used by {state} container {job[:12]}")
    assert engine.remove(image, force=True) is not running and (image in engine.images) is running, \
        "--force: a stopped container's image goes, a running one's stays"
    if running:
        assert engine.remove_containers(job) and engine.containers == {}
        assert engine.remove(image) and image not in engine.images


def test_a_suite_killed_before_its_teardown_leaves_a_container_the_gate_removes_first(matrix, site, engine,
                                                                                     suite_ends, capfd):
    """The image suite's containers go in its teardown (tests/conftest.py's `host`); one
    killed (the OOM killer's SIGKILL) leaves them running, and `rmi` refuses an image a
    container uses. The gate removes the containers that were not there before the suite
    ran, then the image."""
    suite_ends("signal:9")

    def suite(image, matrix_path, engine):
        engine.run_container(RunSpec(image, ("infinity",), entrypoint="sleep", detach=True))   # as `host` does
        return steps.run_image_tests(image, matrix_path, engine, kind=runtime_build.KIND)
    assert exit_code(lambda: build(matrix, site, engine, suite)) == 5
    out = capfd.readouterr()
    image = suite_ran_on(out.out)
    assert len(engine.refusals) == 1 and "image is being used by running container" in engine.refusals[0]
    started = max(i for i, (op, _) in enumerate(engine.calls) if op == "run")      # the suite's container
    after = [op for op, _ in engine.calls[started + 1:] if op != "inspect"]
    assert after == ["remove", "containers", "rm", "remove"], "refused; who uses it; that container; again"
    assert engine.containers == {} and image not in engine.images and engine.untagged() == set()
    assert "nothing was tagged and the image was removed" in out.err and "WARNING: left" not in out.err
    assert f"removed {image} after the containers its suite left: " in out.out


def test_an_image_someones_container_uses_is_left_untagged_and_named(matrix, site, engine, capsys):
    """--no-cache moves the tags to a new image; the one they moved from is removed, but not
    while a container that was not the suite's uses it (a training job, stopped or not):
    the engine refuses, the container stays, and a warning names the image left."""
    first = build(matrix, site, engine, SuiteDouble(0))
    job = engine.add_container(first.image_id, running=False)
    capsys.readouterr()
    again = build(matrix, dataclasses.replace(site, no_cache=True), engine, SuiteDouble(0))
    assert again.image_id != first.image_id and all(engine.tags[t] == again.image_id for t in again.tags)
    assert engine.untagged() == {first.image_id} and list(engine.containers) == [job]
    assert engine.refusals == [f"Error response from daemon: conflict: unable to delete {first.image_id[7:19]} "
                               f"(must be forced) - image is being used by stopped container {job[:12]}"]
    assert (f"WARNING: left {first.image_id} untagged: containers use it ({job}); once they are gone, "
            f"`{engine.client} rmi {first.image_id}` removes it") in capsys.readouterr().err
    assert engine.called("rm") == [], "someone's container is not the gate's to remove"


def test_retest_failing_says_which_tag_the_engine_keeps_for_a_container(matrix, site, engine):
    """docker keeps the last tag of an image a container uses (`rmi` without force): the
    message says which, rather than that every tag went."""
    first = build(matrix, site, engine, SuiteDouble(0))
    job = engine.add_container(first.image_id)
    with pytest.raises(SuiteFailed) as failed:
        build(matrix, dataclasses.replace(site, retest=True), engine, SuiteDouble(1))
    kept = [t for t in first.tags if t in engine.tags]
    assert len(kept) == 1 and str(failed.value).endswith(
        f"(the suite ended with exit 1: tests failed); its tags were removed but {kept[0]}, which the engine keeps "
        f"while a container uses the image ({job})")


IMAGE = "sha256:" + "ab" * 32
CONTAINER = "cd" * 32


def refusing_client_double(folder: Path) -> Path:
    """A docker client for one untagged image that one container uses: `image inspect`,
    `rmi` (refused, in docker's words, while the container is there), `ps` and `rm`;
    every call recorded in calls.log."""
    (folder / "image").touch()
    (folder / "containers").write_text(CONTAINER + "\n")
    client = folder / "docker"
    client.write_text(f"""#!/bin/sh
echo "$@" >> {folder}/calls.log
case "$1" in
  image) [ -f {folder}/image ] || exit 1; echo '[{{"Id": "{IMAGE}", "RepoTags": []}}]' ;;
  rmi) if [ -s {folder}/containers ]; then
         echo "Error response from daemon: conflict: unable to delete {IMAGE[7:19]} (cannot be forced) - image is being used by running container {CONTAINER[:12]}" >&2
         exit 1
       fi
       rm {folder}/image; echo "Deleted: {IMAGE}" ;;
  ps) cat {folder}/containers ;;
  rm) : > {folder}/containers ;;
esac
""")
    client.chmod(0o755)
    return client


@pytest.mark.parametrize("suites", [True, False])
def test_the_real_engine_reports_a_refused_rmi_and_the_gate_acts_on_it(tmp_path, capsys, suites):
    """Engine.remove is False when `rmi` refuses; Engine.containers_of names who uses the
    image. The suite's container (not there before it ran) is removed, then the image;
    someone else's stays, and so does the image, named in a warning."""
    client = refusing_client_double(tmp_path)
    engine = Engine("docker", str(client), "classic-buildkit", "20.10")
    left = steps.remove_untagged(engine, [IMAGE], set() if suites else {CONTAINER})
    calls = (tmp_path / "calls.log").read_text().splitlines()
    asked = [f"image inspect {IMAGE}", f"rmi {IMAGE}", f"ps --all --no-trunc --quiet --filter ancestor={IMAGE[7:]}"]
    if suites:
        assert left == [] and not (tmp_path / "image").exists()
        assert calls == asked + [f"rm --force {CONTAINER}", f"rmi {IMAGE}"]
        assert f"removed {IMAGE} after the containers its suite left: {CONTAINER[:12]}" in capsys.readouterr().out
    else:
        assert left == [IMAGE] and (tmp_path / "image").exists() and not any(c.startswith("rm ") for c in calls)
        assert calls[:3] == asked
        assert f"WARNING: left {IMAGE} untagged: containers use it ({CONTAINER}); once they are gone, `{client} " \
               f"rmi {IMAGE}` removes it" in capsys.readouterr().err


def test_an_image_finished_by_other_code_is_not_reused(matrix, site, engine, monkeypatch):
    """The finish layer (the project's files: manifest, SBOM, the login shells' profile
    script) is not in the rendered Dockerfile: its code is in the content tag, so an image
    finished the old way (no profile script) is built again, not reused."""
    from ascend_build.images import finish
    first = build(matrix, site, engine, SuiteDouble(0))
    builds = len(engine.called("build"))
    monkeypatch.setattr(finish, "fingerprint", lambda: "0" * 64)
    again = build(matrix, site, engine, SuiteDouble(0))
    assert again.content_tag != first.content_tag and len(engine.called("build")) > builds


def test_the_finish_fingerprint_is_the_finish_layers_code(monkeypatch):
    from ascend_build.images import finish
    from ascend_build.provenance import sbom
    before = finish.fingerprint()
    assert before == finish.fingerprint()
    original = Path.read_bytes
    # a change in a module that writes the layer's files is a change of the fingerprint
    monkeypatch.setattr(Path, "read_bytes", lambda self: original(self) + (b"#" if str(self) == sbom.__file__ else b""))
    assert finish.fingerprint() != before
