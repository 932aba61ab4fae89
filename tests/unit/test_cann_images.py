"""`invoke update --cann-images DIR`: the CANN releases Huawei's official CANN images
install (Ascend/cann-container-image), read from a synthetic tree written here in the
shapes its Dockerfiles take (each era's download variables, `${ARCH}` from the build's
platform, variables set by ARG or earlier in the RUN). The deployer's releases stay the
deployer's; a file both name differently is a conflict; a release only the images list
is added with its source and kept by an import that does not read them."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ascend_build.errors import UserError
from ascend_build.matrix import load_matrix
from ascend_build.matrix.frameworks import CANN
from ascend_build.matrix.yamlsource import safe_load
from ascend_build.upstream import cann_images
from ascend_build.upstream.update import update, write
from tests import forked
from tests.conftest import copy_matrix
from tests.doubles.deployer_fixture import DRIVERS, make_deployer

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "tests" / "data" / "upstream-docs"
OBS = "https://ascend-repo.obs.cn-east-2.myhuaweicloud.com/CANN/CANN%20{folder}/"


# ---------------------------------------------------------------------------- a synthetic tree

def _run(downloads: dict[str, str], before: str = "") -> str:
    """A Dockerfile that picks ARCH from the build's platform and downloads in one RUN."""
    sets = "".join(f"    {name}={url} && \\\n" for name, url in downloads.items())
    gets = " && \\\n".join(f'    curl -fsSL -H "Referer: https://example.invalid/" "${{{name}}}" -o /tmp/{i}.run'
                           for i, name in enumerate(n for n in downloads if n.endswith("_URL")))
    return ("FROM ubuntu:22.04 AS fetch\n"
            "ARG TARGETPLATFORM\n" + before +
            "# the download links for this platform\n"
            'RUN ARCH=$(case "${TARGETPLATFORM}" in \\\n'
            '        "linux/amd64") echo "x86_64" ;; \\\n'
            '        "linux/arm64") echo "aarch64" ;; \\\n'
            '        *) echo "no such platform" && exit 1 ;; \\\n'
            "    esac) && \\\n" + sets + gets + "\n"
            "RUN bash /tmp/0.run --quiet --install\n")


def classic(version: str, chip: str, folder: str | None = None) -> str:
    """Up to 8.3: a kernels package per chip (A3's named Atlas-A3-cann-kernels)."""
    base = OBS.format(folder=folder or version)
    kernels = (f"Atlas-A3-cann-kernels_{version}_linux-${{ARCH}}.run" if chip == "a3"
               else f"Ascend-cann-kernels-{chip}_{version}_linux-${{ARCH}}.run")
    return _run({"CANN_TOOLKIT_URL": base + f"Ascend-cann-toolkit_{version}_linux-${{ARCH}}.run",
                 "CANN_KERNELS_URL": base + kernels,
                 "CANN_NNAL_URL": base + f"Ascend-cann-nnal_{version}_linux-${{ARCH}}.run"})


def ops(version: str, chip: str, folder: str | None = None, toolkit_folder: str | None = None) -> str:
    """From 8.5: an operator package per chip (CANN_OPS_URL)."""
    base = OBS.format(folder=folder or version)
    return _run({"CANN_TOOLKIT_URL": OBS.format(folder=toolkit_folder or folder or version)
                 + f"Ascend-cann-toolkit_{version}_linux-${{ARCH}}.run",
                 "CANN_OPS_URL": base + f"Ascend-cann-{chip.upper() if chip == 'a3' else chip}-ops_{version}_linux-${{ARCH}}.run",
                 "CANN_NNAL_URL": base + f"Ascend-cann-nnal_{version}_linux-${{ARCH}}.run"})


def by_args(build: str, chip: str) -> str:
    """The URLs made of ARG defaults and a variable trimmed in the RUN (${CANN_VERSION%.*})."""
    before = f"ARG CANN_VERSION={build}\nARG SOC_VERSION={chip}\nARG BASE=https://ascend-repo.obs.cn-east-2.myhuaweicloud.com\n"
    text = _run({"CANN_SHORT": '"${CANN_VERSION%.*}"',
                 "CANN_TOOLKIT_URL": "${BASE}/CANN/CANN%20${CANN_SHORT}/Ascend-cann-toolkit_${CANN_SHORT}_linux-${ARCH}.run",
                 "CANN_OPS_URL": "${BASE}/CANN/CANN%20${CANN_SHORT}/Ascend-cann-${SOC_VERSION}-ops_${CANN_SHORT}_linux-$ARCH.run",
                 "CANN_NNAL_URL": "${BASE}/CANN/CANN%20${CANN_SHORT}/Ascend-cann-nnal_${CANN_SHORT}_linux-${ARCH}.run"},
                before)
    return text


def devel(tag: str) -> str:
    return f"FROM quay.io/example/cann:{tag}\nRUN apt-get install -y vim\n"


def write_tree(root: Path, dockerfiles: dict[str, str]) -> Path:
    for tag, text in dockerfiles.items():
        (root / "cann" / tag).mkdir(parents=True, exist_ok=True)
        (root / "cann" / tag / "Dockerfile").write_text(text)
    root.mkdir(parents=True, exist_ok=True)
    (root / "README.md").write_text("a synthetic copy\n")
    return root


def tree(root: Path) -> Path:
    """One release per era, 8.5.0 and 9.0.0 also in the deployer double, 8.5.1 only here."""
    return write_tree(root, {
        "8.3.rc2-910b-ubuntu22.04-py3.11": classic("8.3.RC2", "910b"),
        "8.3.rc2-a3-openeuler24.03-py3.11": classic("8.3.RC2", "a3"),
        "8.5.0-910b-ubuntu22.04-py3.11": ops("8.5.0", "910b"),
        "8.5.1-910b-ubuntu22.04-py3.11": ops("8.5.1", "910b"),
        "8.5.1-910b-ubuntu22.04-py3.12": ops("8.5.1", "910b"),
        "8.5.1-a3-openeuler24.03-py3.11": ops("8.5.1", "a3"),
        "8.5.1.alpha001-910b-ubuntu22.04-py3.11": ops("8.5.1.alpha001", "910b", folder="8.5.T9"),
        "9.0.0-910b-ubuntu22.04-py3.11": ops("9.0.0", "910b"),
        "9.0.0-950-ubuntu22.04-py3.11": ops("9.0.0", "950"),
        "9.0.0-beta.2-910b-ubuntu22.04-py3.11": ops("9.0.0-beta.2", "910b", folder="9.0.T511"),
        "9.0.0-910b-ubuntu22.04-py3.11-devel": devel("9.0.0-910b-ubuntu22.04-py3.11"),
    })


@pytest.fixture
def matrix(tmp_path) -> Path:
    return copy_matrix(tmp_path / "m")


def deployer(tmp_path: Path) -> list[Path]:
    return [make_deployer(tmp_path / "d", "6.0.0")]


# ---------------------------------------------------------------------------- the reader

def test_each_eras_download_variables_give_the_files_per_arch_and_chip(tmp_path):
    data = cann_images.read(tree(tmp_path / "cci"))
    assert list(data.releases) == ["8.3.RC2", "8.5.0", "8.5.1", "9.0.0"], "pre-releases and devel images skipped"
    classic_rel, ops_rel = data.releases["8.3.RC2"], data.releases["8.5.1"]
    base = OBS.format(folder="8.3.RC2")
    # ${ARCH} expanded for each arch the images are built for
    assert classic_rel.files["toolkit.aarch64"] == {base + "Ascend-cann-toolkit_8.3.RC2_linux-aarch64.run": [
        "cann/8.3.rc2-910b-ubuntu22.04-py3.11/Dockerfile", "cann/8.3.rc2-a3-openeuler24.03-py3.11/Dockerfile"]}
    assert list(classic_rel.files["toolkit.x86_64"]) == [base + "Ascend-cann-toolkit_8.3.RC2_linux-x86_64.run"]
    # CANN_KERNELS_URL: kernels packages; A3's named Atlas-A3-cann-kernels (chip A3, as the deployer's data names it)
    assert list(classic_rel.files["kernels.910b.x86_64"]) == [base + "Ascend-cann-kernels-910b_8.3.RC2_linux-x86_64.run"]
    assert list(classic_rel.files["kernels.A3.aarch64"]) == [base + "Atlas-A3-cann-kernels_8.3.RC2_linux-aarch64.run"]
    assert list(classic_rel.files["nnal.aarch64"]) == [base + "Ascend-cann-nnal_8.3.RC2_linux-aarch64.run"]
    # CANN_OPS_URL: operator packages
    assert list(ops_rel.files["kernels.A3.x86_64"]) == [OBS.format(folder="8.5.1") + "Ascend-cann-A3-ops_8.5.1_linux-x86_64.run"]
    assert list(data.releases["9.0.0"].files["kernels.950.aarch64"]) == [
        OBS.format(folder="9.0.0") + "Ascend-cann-950-ops_9.0.0_linux-aarch64.run"]
    # what the tags say they are published for
    assert (ops_rel.chips, ops_rel.oses, ops_rel.pythons) == (["910b", "a3"], ["openeuler24.03", "ubuntu22.04"],
                                                              ["3.11", "3.12"])
    assert len(ops_rel.dockerfiles) == 3
    assert {why: len(paths) for why, paths in data.skipped.items()} == {
        "a pre-release (alpha, beta)": 2, "no CANN download (an image built FROM a released one)": 1}
    # a plain folder is named by its folder; the Dockerfile is named in the source
    assert ops_rel.source == (f"{cann_images.REPO} (a copy in a folder named cci): "
                              "cann/8.5.1-910b-ubuntu22.04-py3.11/Dockerfile and 2 more Dockerfiles of 8.5.1 "
                              "(images for 910b, a3 on openeuler24.03, ubuntu22.04)")
    assert cann_images.published(base + "Ascend-cann-toolkit_8.3.RC2_linux-aarch64.run").sha256 is None


def test_urls_made_of_args_and_trimmed_variables_are_expanded(tmp_path):
    data = cann_images.read(write_tree(tmp_path / "t", {"9.1.0-a3-ubuntu22.04-py3.11": by_args("9.1.0.B090", "A3")}))
    rel = data.releases["9.1.0"]
    assert list(rel.files["kernels.A3.aarch64"]) == [OBS.format(folder="9.1.0") + "Ascend-cann-A3-ops_9.1.0_linux-aarch64.run"]
    assert list(rel.files["toolkit.x86_64"]) == [OBS.format(folder="9.1.0") + "Ascend-cann-toolkit_9.1.0_linux-x86_64.run"]


def test_a_variable_nothing_sets_is_refused_naming_it(tmp_path):
    text = ops("8.5.1", "910b").replace("Ascend-cann-910b-ops", "Ascend-cann-${CANN_CHIP}-ops")
    with pytest.raises(UserError, match=r"8\.5\.1-910b-ubuntu22\.04-py3\.11/Dockerfile: CANN_OPS_URL: \$\{CANN_CHIP\} is set by nothing"):
        cann_images.read(write_tree(tmp_path / "t", {"8.5.1-910b-ubuntu22.04-py3.11": text}))


def test_a_git_checkout_is_named_by_its_commit_and_a_bare_clone_reads_alike(tmp_path):
    checkout = tree(tmp_path / "checkout")
    git = ["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "synthetic"]):
        subprocess.run(git + args, check=True, capture_output=True)
    commit = subprocess.run(git + ["rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    data = cann_images.read(checkout)
    assert data.where == f"{cann_images.REPO} {commit}"
    assert data.releases["8.5.1"].source.startswith(f"{cann_images.REPO} {commit}: cann/8.5.1-910b-ubuntu22.04")
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(checkout), str(bare)], check=True, capture_output=True)
    from_bare = cann_images.read(bare)
    assert from_bare.where == data.where and from_bare.releases == data.releases
    (checkout / "cann" / "8.5.1-910b-ubuntu22.04-py3.11" / "Dockerfile").write_text(ops("8.5.1", "910b") + "\n")
    assert cann_images.read(checkout).where == f"{cann_images.REPO} {commit} with local changes"


def test_a_tree_with_no_dockerfiles_is_refused_by_the_task_with_exit_2(matrix, tmp_path):
    empty = write_tree(tmp_path / "empty", {})
    with pytest.raises(UserError, match="no cann/<tag>/Dockerfile inside"):
        cann_images.read(empty)
    task = ["update", "--matrix", str(matrix), "--from", str(deployer(tmp_path)[0]), "--from-docs", str(DOCS)]
    before = (matrix.parent / "imported.yaml").read_text()
    for folder, message in ((empty, "no cann/<tag>/Dockerfile inside; pass a checkout of Ascend/cann-container-image"),
                            (tmp_path / "nowhere", "--cann-images " + str(tmp_path / "nowhere") + ": no such folder")):
        out = forked.invoke(*task, "--cann-images", str(folder))
        assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert (matrix.parent / "imported.yaml").read_text() == before


# ---------------------------------------------------------------------------- merged with the other sources

def test_a_release_only_the_images_list_is_added_with_its_source_and_no_sums(matrix, tmp_path):
    result = update(matrix, deployer(tmp_path), docs_folder=DOCS, images_folder=tree(tmp_path / "cci"))
    data = safe_load(result.text)
    rel = data["cann"]["8.5.1"]
    assert rel["source"].startswith(f"{cann_images.REPO} (a copy in a folder named cci): cann/8.5.1-")
    assert rel["url"] == OBS.format(folder="8.5.1") and rel["driver"] is None
    assert rel["toolkit"] == {a: {"file": f"Ascend-cann-toolkit_8.5.1_linux-{a}.run"} for a in ("aarch64", "x86_64")}
    assert rel["kernels"]["A3"]["aarch64"] == {"file": "Ascend-cann-A3-ops_8.5.1_linux-aarch64.run"}, "no sum: none published"
    assert rel["nnal"]["x86_64"] == {"file": "Ascend-cann-nnal_8.5.1_linux-x86_64.run"}
    # a classic release: A3's kernels by the name its chip's record gives them before 8.5
    assert data["cann"]["8.3.RC2"]["kernels"]["A3"] == {
        a: {"file": f"Atlas-A3-cann-kernels_8.3.RC2_linux-{a}.run"} for a in ("aarch64", "x86_64")}
    assert not any("is not the name" in n for n in result.merged.images_notes), result.merged.images_notes
    # the -devel twins are recorded with their release (no download of their own)
    assert data["cann"]["9.0.0"]["devel_images"] == ["9.0.0-910b-ubuntu22.04-py3.11-devel"]
    assert result.counts["CANN releases only the official CANN images list"] == 2
    assert data["read"]["cann_images"].startswith(f"{cann_images.REPO} (a copy in a folder named cci): 11 Dockerfiles")
    # the released images' tags, each under its release (a deployer's release too): the CANN-only stacks' source
    tags = {v: r["images"] for v, r in data["cann"].items() if "images" in r}
    assert set(tags) == set(cann_images.read(tree(tmp_path / "cci2")).releases) == {"8.3.RC2", "8.5.0", "8.5.1", "9.0.0"}
    assert all(t.startswith(v.lower() + "-") and not t.endswith("-devel") for v, ts in tags.items() for t in ts)
    write(result)
    m = load_matrix(matrix)
    assert m.cann["8.5.1"].toolkit["aarch64"].url == OBS.format(folder="8.5.1") + "Ascend-cann-toolkit_8.5.1_linux-aarch64.run"
    assert m.cann["8.5.1"].toolkit["aarch64"].sha256 is None and m.cann["8.5.1"].nnal, "pinned on first use"
    assert [str(t) for t in m.cann["8.5.1"].images] == tags["8.5.1"]
    assert m.stack_for(CANN, "8.5.1").derived, "its CANN-only stack, derived from those tags"
    # an update without --cann-images keeps them as they were
    again = update(matrix, deployer(tmp_path), docs_folder=DOCS)
    assert {v: r["images"] for v, r in safe_load(again.text)["cann"].items() if "images" in r} == tags


def test_a_release_both_list_stays_the_deployers_where_they_agree(matrix, tmp_path):
    result = update(matrix, deployer(tmp_path), docs_folder=DOCS, images_folder=tree(tmp_path / "cci"))
    assert result.merged.conflicts == []
    rel = safe_load(result.text)["cann"]["8.5.0"]
    assert rel["source"] == "ascend-deployer 6.0.0: ascend_deployer/downloader/software/CANN_8.5.0.json"
    assert "zip_sha256" in rel["toolkit"]["aarch64"], "the deployer's, with its sums"
    # what the deployer lists none of (NNAL; 950's operator package) is the images', said so per part
    assert rel["nnal"]["aarch64"] == {"file": "Ascend-cann-nnal_8.5.0_linux-aarch64.run"}
    assert rel["parts_source"] == {"nnal": f"{cann_images.REPO} (a copy in a folder named cci): cann/8.5.0-910b-"
                                           "ubuntu22.04-py3.11/Dockerfile (the images' download; ascend-deployer "
                                           "6.0.0 lists none)"}
    nine = safe_load(result.text)["cann"]["9.0.0"]
    assert nine["kernels"]["950"]["x86_64"] == {"file": "Ascend-cann-950-ops_9.0.0_linux-x86_64.run"}
    assert sorted(nine["parts_source"]) == ["kernels.950", "nnal"] and "zip_sha256" in nine["kernels"]["910b"]["aarch64"]
    assert "9.0.0: 950 kernels taken from the images (cann/9.0.0-950-ubuntu22.04-py3.11/Dockerfile; no published " \
           "sum)" in result.merged.images_notes
    write(result)
    assert load_matrix(matrix).cann["9.0.0"].kernels["950"]["aarch64"].key[0] == "cann", "imported, not by hand"


def test_a_part_the_images_name_outside_its_eras_rule_is_said_not_taken(matrix, tmp_path):
    """Before 8.5 the A3 kernels are Atlas-A3-cann-kernels: a Dockerfile naming them by the
    kernels rule (Ascend-cann-kernels-A3) names no file Huawei publishes; it is left out."""
    images = tree(tmp_path / "cci")
    text = classic("8.3.RC1", "910b").replace("Ascend-cann-kernels-910b_", "Ascend-cann-kernels-A3_")
    write_tree(images, {"8.3.rc1-a3-ubuntu22.04-py3.11": text})
    result = update(matrix, deployer(tmp_path), docs_folder=DOCS, images_folder=images)
    rel = safe_load(result.text)["cann"]["8.3.RC1"]
    assert "A3" not in rel["kernels"] and "kernels.A3" not in rel["parts_source"]
    assert "8.3.RC1: the images also install A3 kernels; not imported (CANN 8.3.RC1 is ascend-deployer 6.0.0's)" \
        in result.merged.images_notes


def test_a_file_both_name_at_another_url_stops_the_update_until_a_choice(matrix, tmp_path):
    images = tree(tmp_path / "cci")
    for chip in ("910b", "950"):        # the images agree with each other, not with the deployer
        (images / "cann" / f"9.0.0-{chip}-ubuntu22.04-py3.11" / "Dockerfile").write_text(
            ops("9.0.0", chip, toolkit_folder="9.0.T511"))
    before = matrix.read_text()
    with pytest.raises(UserError) as info:
        update(matrix, deployer(tmp_path), docs_folder=DOCS, images_folder=images)
    deployer_url = OBS.format(folder="9.0.0") + "Ascend-cann-toolkit_9.0.0_linux-aarch64.run"
    images_url = OBS.format(folder="9.0.T511") + "Ascend-cann-toolkit_9.0.0_linux-aarch64.run"
    msg = str(info.value)
    assert "cann.9.0.0.toolkit.aarch64: sources disagree (ascend-deployer 6.0.0: ascend_deployer/downloader/" \
           f"software/CANN_9.0.0.json: {deployer_url}; {cann_images.REPO} (a copy in a folder named cci): " in msg
    assert images_url in msg and "undecided" in msg and "upstream.choices" in msg
    choices = "".join(f'    "cann.9.0.0.toolkit.{a}": {{take: "{deployer_url.replace("aarch64", a)}", why: "the release folder"}}\n'
                      for a in ("aarch64", "x86_64"))
    matrix.write_text(before.replace("  choices: {}\n", "  choices:\n" + choices))
    result = update(matrix, deployer(tmp_path), docs_folder=DOCS, images_folder=images)
    assert [c.path for c in result.merged.conflicts] == ["cann.9.0.0.toolkit.aarch64", "cann.9.0.0.toolkit.x86_64"]
    assert all(c.taken == c.values[next(iter(c.values))] for c in result.merged.conflicts)
    assert safe_load(result.text)["cann"]["9.0.0"]["url"] == OBS.format(folder="9.0.0")


def test_an_import_without_the_images_keeps_what_they_added_until_another_source_lists_it(matrix, tmp_path):
    write(update(matrix, deployer(tmp_path), docs_folder=DOCS, images_folder=tree(tmp_path / "cci")))
    written = (matrix.parent / "imported.yaml").read_text()
    again = update(matrix, deployer(tmp_path), docs_folder=DOCS)
    assert not again.changed and again.text == written, again.summary.lines()
    assert "8.5.1" in safe_load(again.text)["cann"]
    kept = safe_load(again.text)["cann"]
    assert "950" in kept["9.0.0"]["kernels"] and kept["9.0.0"]["devel_images"], "the parts and the twins taken"
    # The deployer lists 8.5.1 now: its entry (with sums) replaces the images'.
    newer = make_deployer(tmp_path / "n", "6.0.0", drivers={**DRIVERS, "8.5.1": "25.5.1"})
    replaced = safe_load(update(matrix, [newer], docs_folder=DOCS).text)["cann"]["8.5.1"]
    assert replaced["source"].startswith("ascend-deployer 6.0.0") and replaced["driver"] == "25.5.1"
    # The deployer lists 950's operator package of 9.0.0 now: its file (with its sum) replaces the images'.
    listing = newer / "ascend_deployer/downloader/software/CANN_9.0.0.json"
    doc = json.loads(listing.read_text())
    doc["other"] += [{"filename": f"Ascend-cann-950-ops_9.0.0_linux-{a}.zip", "sha256": "9" * 64,
                      "url": OBS.format(folder="9.0.0") + f"Ascend-cann-950-ops_9.0.0_linux-{a}.zip"}
                     for a in ("aarch64", "x86_64")]
    listing.write_text(json.dumps(doc))
    # (the releases named by rule after 9.0.0 take its chips, 950 now too: their hand entries go)
    hand = matrix.read_text()
    start = hand.index("  9.1.0:\n", hand.index("\ncann_chips:"))
    matrix.write_text(hand[:start] + hand[hand.index("\n# NNAL (ATB", start) + 1:])
    nine = safe_load(update(matrix, [newer], docs_folder=DOCS).text)["cann"]["9.0.0"]
    assert nine["kernels"]["950"]["aarch64"]["zip_sha256"] == "9" * 64
    assert list(nine["parts_source"]) == ["nnal"], "950's is the deployer's now; NNAL still the images'"


def test_the_task_reads_the_images_with_dry_and_check(matrix, tmp_path):
    images = str(tree(tmp_path / "cci"))
    task = ["update", "--matrix", str(matrix), "--from", str(deployer(tmp_path)[0]), "--from-docs", str(DOCS)]
    imported = matrix.parent / "imported.yaml"
    before = imported.read_text()
    dry = forked.invoke(*task, "--cann-images", images, "--dry")
    assert dry.returncode == 0 and "would change" in dry.stdout, dry.stderr
    assert "cann images: 9.0.0: 950 kernels taken from the images" in dry.stdout
    assert "CANN releases only the official CANN images list: 2" in dry.stdout and imported.read_text() == before
    check = forked.invoke(*task, "--cann-images", images, "--check")
    assert check.returncode == 1 and imported.read_text() == before
    wrote = forked.invoke(*task, "--cann-images", images)
    assert wrote.returncode == 0 and "wrote" in wrote.stdout, wrote.stderr
    for extra in (["--cann-images", images], []):       # and without them: what they added is kept
        current = forked.invoke(*task, *extra, "--check")
        assert current.returncode == 0 and "is current" in current.stdout, current.stdout


def test_invoke_matrix_lists_the_releases_only_the_official_images_name_with_their_source():
    out = forked.invoke("matrix", "--wide")       # the source column is the full table's
    assert out.returncode == 0, out.stderr
    section = out.stdout.split("\nCANN releases (imported.yaml", 1)[1].split("\n\n", 1)[0]
    rows = {line.split()[0]: line for line in section.splitlines()[3:]}
    for release in ("8.2.RC2", "8.3.RC2", "8.5.1", "8.5.2"):
        assert release in rows, sorted(rows)
        assert "Ascend/cann-container-image c5a67b3a" in rows[release], rows[release]
    # each release of the committed data, with the source its entry in imported.yaml gives
    imported = safe_load((ROOT / "imported.yaml").read_text())["cann"]
    assert set(rows) == set(imported)
    assert all(rows[v].rstrip().endswith(e["source"]) for v, e in imported.items())
