"""`invoke build --like TAG`: the official tags resolved to the matrix's cells. The 26.1.0
torch-npu tags (Ascend/pytorch docker/OVERVIEW.md, written here by hand: 5 torch_npu releases
x CANN 9.1.0 x 310p/910b/a3/950 x ubuntu22.04/openeuler24.03 x py3.12)."""
from __future__ import annotations

import dataclasses
import itertools
import re
from pathlib import Path

import pytest

from ascend_build.errors import UserError
from ascend_build.matrix import load_matrix
from ascend_build.matrix.eras import cann_key
from ascend_build.matrix.like import resolve
from ascend_build.matrix.yamlsource import safe_load

ROOT = Path(__file__).resolve().parents[2]
MATRIX = load_matrix(ROOT / "matrix.yaml")
RELEASES_26_1_0 = ("2.7.1.post8", "2.9.0.post6", "2.10.0.post4", "2.11.0", "2.12.0")
TAGS_26_1_0 = [f"quay.io/ascend/torch-npu:{npu}-cann9.1.0-{chip}-{os}-py3.12" for npu, chip, os in
               itertools.product(RELEASES_26_1_0, ("310p", "910b", "a3", "950"), ("ubuntu22.04", "openeuler24.03"))]


def test_every_26_1_0_tag_resolves_to_its_stack():
    assert len(TAGS_26_1_0) == 40
    for tag in TAGS_26_1_0:
        like = resolve(MATRIX, tag)
        st = like.stack
        assert st.cann == "9.1.0" and tag.split(":")[1].startswith(st.package + "-cann"), (tag, like)
        assert like.python == "3.12" and like.os in tag and like.chip in tag
    assert {resolve(MATRIX, t).stack.name for t in TAGS_26_1_0} == {
        "2.7.1-26.1.0", "2.9.0-26.1.0", "2.10.0-26.1.0", "2.11.0-26.1.0", "2.12.0-26.1.0"}


def test_every_26_1_0_tag_plans_as_a_cell_with_python_3_12_from_source():
    """Neither Ubuntu 22.04 (3.10) nor openEuler 24.03 (3.11) ships Python 3.12: each of the 40
    tags is a cell whose Python is built from pythons."3.12"'s tarball (not pinned: no sum
    could be checked from here, which the build says)."""
    for tag in TAGS_26_1_0:
        like = resolve(MATRIX, tag)
        cell = MATRIX.cell(like.stack, like.os, like.python, like.chip, "linux/arm64")
        assert cell.python == "3.12" and cell.python_source is not None, tag
        assert cell.python_source.version.startswith("3.12.") and cell.python_source.sha256 is None
        assert cell.python_source.urls[0].startswith("https://www.python.org/ftp/python/3.12.")


def test_pythons_3_13_and_3_14_have_tarballs_and_3_13_is_pinned():
    assert MATRIX.pythons["3.13"].sha256 == "93e583f243454e6e9e4588ca2c2662206ad961659863277afcdb96801647d640"
    assert any(u.startswith("http://deb.debian.org/debian/pool/main/p/python3.13/") for u in MATRIX.pythons["3.13"].urls)
    assert MATRIX.pythons["3.14"].version.startswith("3.14.")
    cell = MATRIX.cell("2.10.0", "ubuntu22.04", "3.13", None, "linux/arm64")
    assert cell.python_source is not None and cell.python_source.sha256 == MATRIX.pythons["3.13"].sha256


def test_a_release_no_stack_pairs_with_the_cann_is_refused_naming_the_nearest():
    with pytest.raises(UserError, match="no stack pairs torch_npu 2.7.1.post10 with CANN 9.1.0. Nearest: --torch"):
        resolve(MATRIX, "quay.io/ascend/torch-npu:2.7.1.post10-cann9.1.0-910b-ubuntu22.04-py3.12")


@pytest.mark.parametrize("ref, message", [
    ("quay.io/ascend/cann:9.1.0-beta.3-910b-ubuntu22.04-py3.11", "CANN 9.1.0-beta.3 is a pre-release, which the import "
     "leaves out (no files of it in imported.yaml); build the release: --like quay.io/ascend/cann:9.1.0-910b-"
     "ubuntu22.04-py3.11 (or --cann 9.1.0)"),
    ("quay.io/ascend/cann:8.5.0.alpha001-910b-ubuntu22.04-py3.10", "build the release: --like quay.io/ascend/cann:"
     "8.5.0-910b-ubuntu22.04-py3.10 (or --cann 8.5.0)"),
    ("quay.io/ascend/cann:9.0.1-910b-alpine3.20-py3.11", "no OS alpine3.20 in the matrix; the OSes it builds: "),
    ("quay.io/ascend/torch-npu:latest", "a torch-npu tag reads"),
    ("quay.io/ascend/torch-npu", "not an image reference with a tag"),
    ("quay.io/ascend/mindie:2.1.rc1-800I-A2-py311-openeuler24.03-lts", "ascend/mindie is neither"),
    ("quay.io/ascend/vllm-ascend:v0.9.0", "unknown vllm-ascend release '0.9.0'"),
    ("quay.io/ascend/vllm-ascend:0.23.0", "a vllm-ascend tag reads v<release>[-<variant>]"),
    ("quay.io/ascend/vllm-ascend:v0.23.0-a3-ubuntu", "a vllm-ascend tag reads v<release>[-<variant>]"),
    ("quay.io/ascend/vllm-ascend:v0.13.0-a5", "vLLM-Ascend 0.13.0's sdist has no Dockerfile.a5"),
    ("quay.io/ascend/vllm-ascend:v0.25.1rc1-310p", "its Dockerfile.310p builds on CANN 9.1.0-beta.1, not on CANN 9.0.1"),
    ("quay.io/ascend/vllm-ascend:v0.9.1", "torch is >=2.5.1, not one release"),
    ("quay.io/ascend/torch-npu:2.12.0-cann9.9.9-910b-ubuntu22.04-py3.12", "CANN 9.9.9: not a release"),
    ("quay.io/ascend/torch-npu:2.12.0-cann9.1.0-910b-alpine3.20-py3.12", "no OS alpine3.20"),
])
def test_a_tag_that_names_no_cell_is_refused_with_why(ref, message):
    import re
    with pytest.raises(UserError, match=re.escape(message)):
        resolve(MATRIX, ref)


def test_build_like_plans_the_cell_and_refuses_other_choices_beside_it():
    from tests.forked import invoke
    # --unlocked: the 26.x stacks have no lock yet (a build refuses them without it)
    out = invoke("build", "--like", "quay.io/ascend/torch-npu:2.12.0-cann9.1.0-910b-ubuntu22.04-py3.11", "--dry",
                 "--unlocked")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "stack 2.12.0-26.1.0, --os ubuntu22.04, --python 3.11, --chip 910b" in out.stdout + out.stderr
    assert "ascend-runtime:cann9.1.0-910b-ubuntu22.04-py3.11-torch2.12.0-npu2.12.0-arm64" in out.stdout
    both = invoke("build", "--like", "quay.io/ascend/torch-npu:2.12.0-cann9.1.0-910b-ubuntu22.04-py3.11",
                  "--torch", "2.1.0", "--dry")
    assert both.returncode == 2 and "--like names the stack" in both.stderr


# Every official CANN image the import lists (cann.<release>.images: Ascend/cann-container-image's
# released tags, 8.1.RC1 on; not -devel, not the pre-releases), read from the data, not typed here;
# and their -devel twins as the import found them (cann.<release>.devel_images).
CANN_TAGS = [f"quay.io/ascend/cann:{tag}" for rel in MATRIX.cann.values() for tag in rel.images]
DEVEL_TAGS = [f"quay.io/ascend/cann:{tag}" for rel in MATRIX.cann.values() for tag in rel.devel_images]


def _label(plan: str, name: str) -> str:
    found = re.search(rf"--label '?io\.ascend-build\.{name}=([^' ]+)", plan)
    assert found, (name, plan[-2000:])
    return found.group(1)


def test_build_like_dry_plans_every_26_1_0_tag_and_every_official_cann_tag_as_the_tag_says(monkeypatch, capsys):
    """`invoke build --like TAG --dry`, the task's own action, for each 26.1.0 tag and each
    official cann: tag of the import, written and derived stacks alike (their Dockerfiles are
    rendered and committed): the plan's chip, OS, Python, CANN and torch_npu are the tag's. The
    A3 tags of 8.1.RC1 to 8.3.RC2 plan their Atlas-A3-cann-kernels file. (The engine is the dry
    run's stand-in for a machine without a client: a plan, not this machine's docker, is what is
    checked.)"""
    from ascend_build import engine as eng
    from ascend_build.chips import spelling
    from ascend_build.cli import building
    monkeypatch.setattr(building, "load_matrix", lambda path: MATRIX)
    monkeypatch.setattr(eng, "for_task", lambda kind="docker", client=None, dry=False: eng.Engine(
        "docker", "docker", "buildx", "?"))
    planned = derived = 0
    for tag in TAGS_26_1_0 + CANN_TAGS:
        name = tag.split(":", 1)[1]
        parts = re.fullmatch(r"(?:(?P<npu>[^-]+)-cann)?(?P<cann>[0-9.RCrc]+)-(?P<chip>[^-]+)-(?P<os>[a-z]+[0-9.]+)"
                             r"-py(?P<py>3\.[0-9]+)", name)
        assert parts, tag
        building.build(building.BuildOptions(like=tag, dry=True, unlocked=True))
        plan = capsys.readouterr()
        plan_text = plan.out + plan.err
        stack = MATRIX.stack(_label(plan_text, "stack"))
        assert _label(plan_text, "chip") == spelling(parts["chip"]), tag
        assert _label(plan_text, "os") == parts["os"] and _label(plan_text, "python") == parts["py"], tag
        # the tags spell release candidates in lower case (8.1.rc1); the files as Huawei names them
        assert stack.cann.lower() == parts["cann"].lower() and f"toolkit_{stack.cann}_linux-aarch64" in plan_text, tag
        assert f"images/runtime/{stack.name}/{parts['os']}/Dockerfile" in plan_text, tag
        if parts["npu"]:
            assert stack.package == parts["npu"], tag
        else:
            assert stack.framework.name == "cann", tag
        kernels = MATRIX.cann[stack.cann].kernels[spelling(parts["chip"])]["aarch64"].file
        assert f"ASCEND_CHIP={spelling(parts['chip'])} " in plan_text and kernels in plan_text, tag
        planned += 1
        derived += stack.derived
    assert planned == 40 + 147 and derived == 87      # 147 cann: tags, 60 of them 9.0.0's and 9.0.1's entries


def test_every_devel_twin_of_an_official_cann_tag_plans_the_devel_image_on_its_cann_only_image(monkeypatch, capsys):
    """From CANN 9.0.0 every official cann: image has a `-devel` twin (the import reads the
    released tags without them): `--like TAG-devel --dry` resolves to the same cell with
    --devel, and plans both images, the devel one FROM the CANN-only one's content tag."""
    from ascend_build import engine as eng
    from ascend_build.cli import building
    from ascend_build.matrix.eras import cann_key
    monkeypatch.setattr(building, "load_matrix", lambda path: MATRIX)
    monkeypatch.setattr(eng, "for_task", lambda kind="docker", client=None, dry=False: eng.Engine(
        "docker", "docker", "buildx", "?"))
    twins = DEVEL_TAGS
    assert len(twins) == 60 and all(cann_key(resolve(MATRIX, t).stack.cann) >= cann_key("9.0.0") for t in twins)
    for tag in twins:
        found = resolve(MATRIX, tag)
        assert found.devel and found == dataclasses.replace(resolve(MATRIX, tag.removesuffix("-devel")), devel=True)
        building.build(building.BuildOptions(like=tag, dry=True, unlocked=True))
        plan = capsys.readouterr().out
        runtime = _label(plan, "content-tag")           # the CANN-only image's, planned first
        devel = plan[plan.index("images/devel/"):]
        assert f"images/devel/{found.os}/Dockerfile" in plan and "io.ascend-build.kind=devel" in devel, tag
        assert f"--build-arg RUNTIME_IMAGE=ascend-runtime:{runtime}-arm64" in devel, tag
        assert f"ascend-runtime:{found.stack.name}-{found.chip.lower()}-{found.os}-py{found.python}-devel-arm64" in devel, tag


def test_the_import_lists_every_released_official_cann_image_from_8_1_rc1():
    """147 tags of 10 releases, as `invoke update --cann-images` read Ascend/cann-container-image
    c5a67b3a (its 401 Dockerfiles less the -devel ones and the alpha and beta pre-releases)."""
    by_release = {v: len(rel.images) for v, rel in MATRIX.cann.items() if rel.images}
    assert by_release == {"8.1.RC1": 13, "8.2.RC1": 12, "8.2.RC2": 8, "8.3.RC1": 8, "8.3.RC2": 8, "8.5.0": 10,
                          "8.5.1": 18, "8.5.2": 10, "9.0.0": 30, "9.0.1": 30}
    assert not any(t.devel or t.pre_release for rel in MATRIX.cann.values() for t in rel.images)


def test_every_official_cann_tag_plans_its_cell_or_is_refused_naming_the_chips_that_work():
    """Each tag of the import: its stack is CANN-only on the tag's release (written or derived,
    never missing), and its cell has the tag's chip, OS and Python, the release's toolkit and the
    chip's kernels; the runtime Dockerfile rendered for it installs that release (an A3 cell of
    8.1.RC1 to 8.3.RC2 the Atlas-A3-cann-kernels file). Where a release had no kernels for the
    tag's chip, the refusal would name the chips that have them: none is left."""
    from ascend_build.chips import spelling
    from ascend_build.images.render import runtime_dockerfile
    planned, refused = 0, []
    for ref in CANN_TAGS:
        tag = ref.split(":", 1)[1]
        like = resolve(MATRIX, ref)
        st = like.stack
        assert st.framework.name == "cann" and st.cann.lower() == tag.split("-")[0], ref
        assert like.os == tag.split("-")[2] and like.python == tag.split("-py")[1] and like.chip == tag.split("-")[1]
        release = MATRIX.cann[st.cann]
        if spelling(like.chip) not in release.kernels:
            with pytest.raises(UserError, match=re.escape(f"chips with kernels: {', '.join(release.kernels)}")):
                MATRIX.cell(like.stack, like.os, like.python, like.chip, "linux/arm64")
            refused.append((st.cann, spelling(like.chip)))
            continue
        cell = MATRIX.cell(like.stack, like.os, like.python, like.chip, "linux/arm64")
        assert (cell.os.name, cell.python, cell.chip, cell.cann.version) == (like.os, like.python,
                                                                              spelling(like.chip), st.cann), ref
        assert cell.toolkit.file == f"Ascend-cann-toolkit_{st.cann}_linux-aarch64.run"
        assert cell.kernels is release.kernels[spelling(like.chip)]["aarch64"]
        assert cell.nnal is release.nnal.get("aarch64"), "NNAL where the release has it"
        text = runtime_dockerfile(MATRIX, st, cell.os).text
        assert f'io.ascend-build.cann="{st.cann}"' in text and f"toolkit_{st.cann}_linux-" in text, ref
        if cell.kernels.file.startswith("Atlas-A3-"):       # the chip's own name, chosen by the build's chip
            assert (f'if [ "${{ASCEND_CHIP}}" = A3 ]; then pkg="/tmp/cann/'
                    f'{cell.kernels.file.replace("aarch64", "${ASCEND_ARCH}")}"; fi' in text), ref
        planned += 1
    assert planned + len(refused) == len(CANN_TAGS) == 147 and planned == 147, refused
    assert sum(1 for ref in CANN_TAGS if "-a3-" in ref and cann_key(resolve(MATRIX, ref).stack.cann) < cann_key("8.5.0")) == 13


def test_every_final_cann_tag_of_the_snapshot_the_import_read_plans_by_name(monkeypatch, capsys):
    """The sweep: every final (not alpha, not beta) `cann:` tag of the copy of
    Ascend/cann-container-image the import read (its released images, cann.<v>.images, and their
    -devel twins, cann.<v>.devel_images), each through `invoke build --like quay.io/ascend/cann:<tag>
    --dry`, the task's own action in this process. A tag plans when the build prints its plan;
    each that does not is named with the reason the build gives. (--unlocked: a stack without its
    lock is the lock's own gate, which a dry run names after the plan: `invoke lock`.)"""
    from ascend_build import engine as eng
    from ascend_build.cli import building
    monkeypatch.setattr(building, "load_matrix", lambda path: MATRIX)
    monkeypatch.setattr(eng, "for_task", lambda kind="docker", client=None, dry=False: eng.Engine(
        "docker", "docker", "buildx", "?"))
    snapshot = safe_load((ROOT / "imported.yaml").read_text())["read"]["cann_images"]
    assert snapshot.startswith("Ascend/cann-container-image c5a67b3a"), snapshot
    assert f"{len(CANN_TAGS)} of them for" in snapshot, "every released image the import read, and no other"
    planned, failed = 0, {}
    for tag in CANN_TAGS + DEVEL_TAGS:
        try:
            building.build(building.BuildOptions(like=tag, dry=True, unlocked=True))
        except UserError as exc:
            failed[tag] = str(exc)
            continue
        plan = capsys.readouterr().out
        # the image it plans is named as the tag is, on the CANN-only stack (cann<tag>)
        assert f"ascend-runtime:cann{tag.split(':', 1)[1]}-arm64" in plan.lower(), tag
        planned += 1
    print(f"{planned} of {len(CANN_TAGS) + len(DEVEL_TAGS)} final cann: tags plan by name")
    assert (planned, len(CANN_TAGS) + len(DEVEL_TAGS)) == (207, 207), failed


def test_a_cann_only_stack_is_derived_for_each_release_the_official_images_publish():
    """The derived stacks: the images' Python range, the most published Python its default,
    NNAL as the release has it; none for a release cann_stacks: writes (the written one is
    the site's override). A release no image publishes (8.0.0) has one too, its Pythons from
    the releases published for it (tests/unit/test_first_hour_fifth.py)."""
    derived = {st.cann: st for st in MATRIX.derived.values() if st.framework.name == "cann"}
    with_images = {v for v, rel in MATRIX.cann.items() if rel.images}
    written = {st.cann for st in MATRIX.stacks.values() if st.framework.name == "cann"}
    assert set(derived) == set(MATRIX.cann) - written and "8.5.1" in derived and "8.0.0" in derived
    for version, st in derived.items():
        if version not in with_images:
            continue
        pythons = sorted({t.python for t in MATRIX.cann[version].images}, key=lambda p: int(p.split(".")[1]))
        assert (st.python_min, st.python_max) == (pythons[0], pythons[-1]) and st.derived and st.nnal is None
    assert (derived["8.5.1"].python_min, derived["8.5.1"].python_max) == ("3.10", "3.12")
    assert derived["8.2.RC2"].pythons() == ["3.11"]


# ---------------------------------------------------------------- Huawei's SWR registry: dated tags

SWR_910B = "swr.cn-north-12.myhuaweicloud.com/atlas_inference/cann:9.2.0_20260930220649-910b-ubuntu22.04-py3.12"


def _dry(monkeypatch, capsys, ref: str) -> str:
    """`invoke build --like REF --dry --unlocked`, the task's own action, in this process."""
    from ascend_build import engine as eng
    from ascend_build.cli import building
    monkeypatch.setattr(building, "load_matrix", lambda path: MATRIX)
    monkeypatch.setattr(eng, "for_task", lambda kind="docker", client=None, dry=False: eng.Engine(
        "docker", "docker", "buildx", "?"))
    building.build(building.BuildOptions(like=ref, dry=True, unlocked=True))
    captured = capsys.readouterr()
    return captured.out + captured.err


def test_a_dated_swr_tag_plans_cann_9_2_0_for_910b_on_ubuntu_22_04_with_python_3_12(monkeypatch, capsys):
    """The tag vLLM-Ascend 0.30.0rc2 builds FROM: the release, chip, OS and Python as the
    undated form's; the date is the image's build, in a label (the same cell either way)."""
    like = resolve(MATRIX, SWR_910B)
    assert (like.stack.name, like.os, like.python, like.chip) == ("cann9.2.0", "ubuntu22.04", "3.12", "910b")
    assert like.built == "2026-09-30T22:06:49" and not like.devel
    plan = _dry(monkeypatch, capsys, SWR_910B)
    assert (_label(plan, "stack"), _label(plan, "chip"), _label(plan, "os"), _label(plan, "python")) == (
        "cann9.2.0", "910b", "ubuntu22.04", "3.12")
    assert _label(plan, "like-built") == "2026-09-30T22:06:49" and _label(plan, "like") == SWR_910B
    assert "Ascend-cann-toolkit_9.2.0_linux-aarch64.run" in plan and "Ascend-cann-910b-ops_9.2.0_linux-aarch64" in plan
    assert "images/runtime/cann9.2.0/ubuntu22.04/Dockerfile" in plan
    # its environment is borrowed from the nearest release the official images install, which it says
    assert MATRIX.cann["9.2.0"].env is not None and MATRIX.cann["9.2.0"].env.borrowed_from == "9.0.1"
    # an undated quay tag of another release gets no date label
    quay = _dry(monkeypatch, capsys, "quay.io/ascend/cann:9.0.1-910b-ubuntu22.04-py3.12")
    assert "like-built" not in quay and _label(quay, "like") == "quay.io/ascend/cann:9.0.1-910b-ubuntu22.04-py3.12"


def test_a_dated_devel_tag_plans_the_devel_image_on_the_cann_only_one(monkeypatch, capsys):
    ref = SWR_910B.replace("910b-ubuntu22.04", "a3-openeuler24.03") + "-devel"
    like = resolve(MATRIX, ref)
    assert like.devel and like.chip == "a3" and like.os == "openeuler24.03" and like.stack.cann == "9.2.0"
    plan = _dry(monkeypatch, capsys, ref)
    assert "images/devel/openeuler24.03/Dockerfile" in plan and _label(plan, "chip") == "A3"


def test_a_dated_tag_plans_on_its_lock_and_one_without_a_lock_names_invoke_lock():
    """cann9.2.0 is locked for the SWR tags' Python (py3.12, arm64): the dry run plans on it;
    a tag of a Python with no lock plans, then says what a real run stops at."""
    from tests.forked import invoke
    out = invoke("build", "--like", SWR_910B, "--dry")
    assert out.returncode == 0 and "io.ascend-build.stack=cann9.2.0" in out.stdout, out.stderr
    assert "locked by locks/cann9.2.0/py3.12-aarch64" in out.stdout
    out = invoke("build", "--like", SWR_910B.replace("-py3.12", "-py3.10"), "--dry")
    assert out.returncode == 2 and "io.ascend-build.stack=cann9.2.0" in out.stdout, out.stderr
    assert "has no lock" in out.stderr and "invoke lock --cann 9.2.0 --python 3.10" in out.stderr


@pytest.mark.parametrize("ref, said", [
    ("swr.cn-south-1.myhuaweicloud.com/atlas_inference/cann:9.2.0_20260930220649-910b-ubuntu22.04-py3.12",
     "swr.cn-south-1.myhuaweicloud.com is not where Huawei's dated CANN images are: --like takes quay.io/ascend/"),
    ("atlas_inference/cann:9.2.0_20260930220649-910b-ubuntu22.04-py3.12", "no registry is not where"),
    ("swr.cn-north-12.myhuaweicloud.com/other/cann:9.2.0_20260930220649-910b-ubuntu22.04-py3.12",
     "on swr.cn-north-12.myhuaweicloud.com --like takes atlas_inference/cann:TAG"),
    ("swr.cn-north-12.myhuaweicloud.com/atlas_inference/cann:9.2.0-910b-ubuntu22.04-py3.12",
     "the undated form is quay.io/ascend/cann's: --like quay.io/ascend/cann:9.2.0-910b-ubuntu22.04-py3.12"),
    ("swr.cn-north-12.myhuaweicloud.com/atlas_inference/cann:9.2.0_20261330220649-910b-ubuntu22.04-py3.12",
     "(a real date)"),
    ("swr.cn-north-12.myhuaweicloud.com/atlas_inference/cann:9.2.0_2026093022064-910b-ubuntu22.04-py3.12",
     "reads <cann>_<YYYYMMDDhhmmss>-<chip>-<os>-py<X.Y>[-devel]"),
    ("swr.cn-north-12.myhuaweicloud.com/atlas_inference/cann:9.2.0a1_20260930220649-910b-ubuntu22.04-py3.12",
     "CANN 9.2.0a1 is not a release"),
    ("swr.cn-north-12.myhuaweicloud.com/atlas_inference/cann:9.9.0_20260930220649-910b-ubuntu22.04-py3.12",
     "CANN 9.9.0: not a release the matrix knows"),
    ("quay.io/ascend/cann:9.2.0_20260930220649-910b-ubuntu22.04-py3.12",
     "a dated tag is Huawei's SWR registry's form, not quay.io's: --like swr.cn-north-12.myhuaweicloud.com/"),
    ("evil.example/ascend/cann:9.0.1-910b-ubuntu22.04-py3.11",
     "or swr.cn-north-12.myhuaweicloud.com/atlas_inference/cann:<cann>_<YYYYMMDDhhmmss>"),
])
def test_a_dated_tag_elsewhere_or_malformed_is_refused_with_what_is_taken(ref, said):
    with pytest.raises(UserError, match=re.escape(said)):
        resolve(MATRIX, ref)


@pytest.mark.parametrize("form", __import__("ascend_build.matrix.like", fromlist=["FORMS"]).FORMS,
                         ids=lambda f: f"{f.image}:{f.form}")
def test_each_tag_form_the_support_page_lists_is_taken_or_refused_as_it_says(form):
    """docs/support.md's table (FORMS): a taken form's example resolves to a cell of the tag's
    release; a refused one's is refused, saying what to build instead where there is one."""
    ref = f"{form.image}:{form.example}"
    if form.taken and form.image.endswith("/vllm-ascend"):
        like = resolve(MATRIX, ref)       # a serving image: the release's, the variant's chip and OS
        assert like.vllm == "0.23.0" and like.chip.lower() == "a3" and like.os.startswith("openeuler"), ref
        return
    if form.taken:
        like = resolve(MATRIX, ref)
        release = form.example.split("-cann")[-1].split("_")[0].split("-")[0]
        assert like.stack.cann.lower() == release.lower() and like.chip in form.example, ref
        return
    with pytest.raises(UserError) as refused:
        resolve(MATRIX, ref)
    said = str(refused.value)
    assert any(hint in said for hint in ("--like quay.io/ascend/cann:", "give the full tag", "names no release",
                                         "invoke build --cann 9.0.1 --chip 910b --python 3.11")), said


def test_the_manylinux_builder_tags_are_refused_naming_the_builders_and_the_cann_only_image():
    for tag in ("9.0.1-a3-manylinux_2_34-py3.12", "8.3.rc1-910b-manylinux_2_28-py3.10"):
        with pytest.raises(UserError) as refused:
            resolve(MATRIX, f"quay.io/ascend/manylinux:{tag}")
        said = str(refused.value)
        assert "flavors manylinux_2_28, manylinux_2_34" in said
        release, chip, _, py = tag.split("-")
        assert f"invoke build --cann {release.upper()} --chip {chip} --python {py[2:]}" in said, said


def test_the_support_page_shows_every_tag_form():
    from ascend_build.cli.support import support_page
    from ascend_build.matrix.like import FORMS
    page = support_page(MATRIX)
    section = page.split("## Official tags", 1)[1]
    for form in FORMS:
        assert f"| `{form.image}` | `{form.form.replace('|', chr(92) + '|')}` | `{form.example}` | " \
               f"{'taken' if form.taken else 'refused'} |" in section, form
