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
import signal
from pathlib import Path

import pytest

from ascend_build.engine import interrupts
from ascend_build.errors import CODE, BuildFailed, Differs, UserError
from ascend_build.errors import TestsFailed as SuiteFailed
from ascend_build.images import batch, registry, verify
from ascend_build.images import build as runtime_build
from ascend_build.images.kinds import label
from ascend_build.inputs.options import Inputs, Site
from ascend_build.matrix import load_matrix
from tests.conftest import copy_matrix, link_locks
from tests.doubles.cann_double import make_run
from tests.doubles.engine_double import EngineDouble

STACK = dict(stack="2.1.0", os="debian12", python="3.11", platform="linux/arm64")
BASE = "debian:bookworm"


@pytest.fixture(scope="module")
def packages(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("cann")
    make_run(folder, "toolkit", "8.0.RC3", "aarch64")
    make_run(folder, "kernels", "8.0.RC3", "aarch64", chip="910b")
    return folder


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    return load_matrix(link_locks(copy_matrix(tmp_path_factory.mktemp("matrix"))))


@pytest.fixture
def site(tmp_path, packages) -> Site:
    return Site(packages=(packages,), offline=True, cache=tmp_path / "cache", work=tmp_path / "work")


@pytest.fixture
def engine() -> EngineDouble:
    double = EngineDouble()
    double.add(BASE, platform="linux/arm64")       # the image's base (and, on the fast path, the build machine's)
    return double


class Suite:
    """The image suite as the gate runs it: records each image it was run on; `verdict`
    is its exit code."""

    def __init__(self, verdict: int = 0):
        self.verdict, self.ran = verdict, []

    def __call__(self, image, matrix_path, engine) -> int:
        self.ran.append(image)
        return self.verdict


def build(matrix, site, engine, suite, **cell):
    return runtime_build.build(matrix, matrix.cell(**{**STACK, **cell}), site, Inputs(repository="ascend-runtime"),
                               engine, suite)


def plan_tags(matrix, site, engine, **cell):
    p = runtime_build.prepare(matrix, matrix.cell(**{**STACK, **cell}), site, Inputs(repository="ascend-runtime"),
                              engine)
    return list(p.plan.tags)


def test_a_passing_suite_tags_every_tag_on_the_image_it_tested(matrix, site, engine):
    suite = Suite(0)
    built = build(matrix, site, engine, suite)
    tags = list(built.tags)
    assert len(tags) >= 2 and all(engine.tags.get(t) == built.image_id for t in tags)
    assert suite.ran == [built.image_id], "the suite ran once, on the image that was then tagged"
    # The tagged image is the finished one: the project's files are its last layer.
    assert engine.images[built.image_id].config["config"]["Labels"][label("content-tag")] == built.content_tag
    assert engine.untagged() == set(), "the candidate before the project's files was removed"


def test_a_failing_suite_tags_nothing_and_removes_what_it_built(matrix, site, engine):
    suite = Suite(1)
    with pytest.raises(SuiteFailed, match="nothing was tagged and the image was removed"):
        build(matrix, site, engine, suite)
    tags = plan_tags(matrix, site, engine)
    assert not any(t in engine.tags for t in tags)
    assert engine.untagged() == set(), "no candidate left behind"
    assert len(suite.ran) == 1


def test_keep_failed_keeps_the_untagged_candidate_to_debug(matrix, site, engine):
    with pytest.raises(SuiteFailed, match="It is kept") as kept:
        build(matrix, dataclasses.replace(site, keep_failed=True), engine, Suite(1))
    image = str(kept.value).split("image tests failed for ")[1].split()[0]
    assert image in engine.untagged() and not any(t in engine.tags for t in plan_tags(matrix, site, engine))


def test_a_failed_build_tags_nothing_and_runs_no_suite(matrix, site, packages, tmp_path):
    engine = EngineDouble(fail_build=lambda req: True)
    engine.add(BASE)
    suite = Suite(0)
    with pytest.raises(BuildFailed, match="nothing was tagged"):
        build(matrix, site, engine, suite)
    assert suite.ran == [] and engine.tags == {BASE: engine.tags[BASE]}


def test_a_tested_image_is_reused_without_a_build_and_retest_runs_its_suite(matrix, site, engine):
    first = build(matrix, site, engine, Suite(0))
    builds = len(engine.called("build"))
    suite = Suite(0)
    again = build(matrix, site, engine, suite)
    assert again.image_id == first.image_id
    # Its log says so, beside the first build's log, which stays (CI uploads both kinds).
    assert again.log.name == "reused.log" and first.log.is_file() and again.log.parent == first.log.parent
    assert "nothing built" in again.log.read_text() and first.tags.content in again.log.read_text()
    assert len(engine.called("build")) == builds and suite.ran == [], "no build, no suite: reused as tested"
    # --retest: the suite runs on it again; passing, it keeps its tags.
    suite = Suite(0)
    build(matrix, dataclasses.replace(site, retest=True), engine, suite)
    assert suite.ran == [first.image_id] and len(engine.called("build")) == builds
    # Failing again, its tags are taken away.
    with pytest.raises(SuiteFailed, match="failed its suite again; its tags were removed"):
        build(matrix, dataclasses.replace(site, retest=True), engine, Suite(1))
    assert not any(t in engine.tags for t in first.tags)


def test_no_cache_builds_again_and_tests_before_moving_the_tags(matrix, site, engine, capsys):
    first = build(matrix, site, engine, Suite(0))
    capsys.readouterr()
    suite = Suite(0)
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
    suite = Suite(0)
    built = build(matrix, site, engine, suite)
    assert suite.ran == [built.image_id]


def test_build_all_goes_on_past_a_failed_cell_and_reports_it(matrix, site, engine):
    cells = [matrix.cell("2.1.0", "ubuntu22.04", "3.10", None, "linux/arm64"), matrix.cell(**STACK)]
    outcomes = batch.build_many(matrix, cells, site, Inputs(repository="ascend-runtime"), engine, Suite(0))
    assert [o.status for o in outcomes] == ["failed", "tagged"]
    assert "base image ubuntu:22.04 is not here and cannot be pulled" in outcomes[0].detail
    assert "ubuntu" not in " ".join(engine.called("build")), "the failed cell was refused before its build"
    assert "1 of 2" not in batch.summary(outcomes) and "failed" in batch.summary(outcomes)


@pytest.fixture(scope="module")
def unlocked_matrix(tmp_path_factory):
    """A copy elsewhere, no locks beside it, whose 2.1.0 asks for other numpys than the
    project's lock was made from: its cells have no lock."""
    from tests.conftest import committed_matrix_text
    text = committed_matrix_text().replace('numpy: "<2"}      # new protobuf', 'numpy: "<1.26"}  #', 1)
    assert text != committed_matrix_text()
    return load_matrix(copy_matrix(tmp_path_factory.mktemp("unlocked"), text))


def test_a_cell_without_a_lock_is_refused_before_the_engine_unless_unlocked(unlocked_matrix, site, engine, capsys):
    before, suite = dict(engine.tags), Suite(0)
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
    built = build(unlocked_matrix, dataclasses.replace(site, unlocked=True, epoch=1700000000), engine, Suite(0))
    lines = verify.verify(unlocked_matrix, built.tags.readable, site, Inputs(), engine)
    assert any(line.startswith("image ID: the same") for line in lines), lines


def test_build_all_fails_the_row_of_a_cell_without_a_lock_and_builds_the_others(matrix, site, engine):
    cells = [matrix.cell(**{**STACK, "platform": "linux/amd64"}), matrix.cell(**STACK)]   # no x86_64 locks
    outcomes = batch.build_many(matrix, cells, site, Inputs(repository="ascend-runtime"), engine, Suite(0))
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
    build(matrix, dataclasses.replace(site, work=tmp_path / "count"), engine, Suite(0))
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
        suite = Suite(0)
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
    built = build(matrix, site, engine, Suite(0))
    cell = matrix.cell(**STACK)
    first = registry.push(engine, [cell], "ascend-runtime", "127.0.0.1:5000/ascend")
    assert first.pushed and not first.skipped
    pushes = len(engine.called("push"))
    again = registry.push(engine, [cell], "ascend-runtime", "127.0.0.1:5000/ascend")
    assert again.skipped and not again.pushed and len(engine.called("push")) == pushes
    assert again.lists == [f"127.0.0.1:5000/ascend:{cell.tag_name}"]
    assert engine.registry[f"127.0.0.1:5000/ascend:{cell.tag_name}"][0].image == built.image_id


def test_push_and_join_refuse_a_test_only_image(matrix, site, engine):
    built = build(matrix, site, engine, Suite(0))
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
    return site, build(matrix, site, engine, Suite(0))


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
    built = build(matrix, site, engine, Suite(0))           # not --reproducible
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
    built = build(matrix, made, engine, Suite(0))
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


def test_verify_finds_the_packages_the_build_was_given_without_the_option(matrix, reproducible, engine):
    """The first hour's `invoke verify --image` failed with exit 3 until --packages was given
    again: the build now keeps the .run files it was given in the cache, by sum."""
    site, built = reproducible
    plain = dataclasses.replace(site, packages=(), epoch=None)
    lines = verify.verify(matrix, built.tags.readable, plain, Inputs(), engine)
    assert any(line.startswith("image ID: the same") for line in lines), lines
