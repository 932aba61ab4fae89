from ascend_build.images.checks import env_gaps, missing_libraries, unresolved

LDD = """\
\tlinux-vdso.so.1 (0x0000ffff)
\tlibhccl.so => /usr/local/Ascend/ascend-toolkit/latest/lib64/libhccl.so (0x0000ffff)
\tlibascend_hal.so => not found
\tlibgraph.so => not found
"""

SET_ENV = {
    "ASCEND_TOOLKIT_HOME": "/usr/local/Ascend/ascend-toolkit/latest",
    "ASCEND_HOME_PATH": "/usr/local/Ascend/ascend-toolkit/latest",
    "ASCEND_OPP_PATH": "/usr/local/Ascend/ascend-toolkit/latest/opp",
    "ASCEND_AICPU_PATH": "/usr/local/Ascend/ascend-toolkit/latest",
    "TOOLCHAIN_HOME": "/usr/local/Ascend/ascend-toolkit/latest/toolkit",
    "LD_LIBRARY_PATH": "/a/lib64:/b/driver:",
    "PYTHONPATH": "/a/python:",
    "PATH": "/a/bin:/usr/bin:/bin",
}


def test_unresolved_and_driver_allowance():
    assert unresolved(LDD) == {"libascend_hal.so", "libgraph.so"}
    assert missing_libraries({"x.so": LDD}) == {"x.so": {"libgraph.so"}}
    assert missing_libraries({"x.so": LDD.replace("libgraph.so => not found", "")}) == {}


def test_env_gaps():
    image = dict(SET_ENV, LD_LIBRARY_PATH="/b/driver:/a/lib64", PATH="/opt/venv/bin:/a/bin:/usr/bin:/bin")
    assert env_gaps(SET_ENV, image) == []
    image.pop("ASCEND_OPP_PATH")
    image["PYTHONPATH"] = "/other"
    gaps = env_gaps(SET_ENV, image)
    assert any("lacks ASCEND_OPP_PATH" in g for g in gaps)
    assert any("PYTHONPATH lacks /a/python" in g for g in gaps)


# ------------------------------------------------------------------ paths as the kernel sees them
# From 8.5 a release's tree is /usr/local/Ascend/cann-<v>, with ascend-toolkit/latest a link to
# it: a real set_env.sh may name the tree, the official images' ENV (the image's) the link.
LINK = "/usr/local/Ascend/ascend-toolkit/latest"
TREE = "/usr/local/Ascend/cann-8.5.0"


def _tree(tmp_path):
    """A folder tree with the link, as an 8.5 image has it, and what the image suite's script
    reads of it (RESOLVE_SCRIPT, run as the suite runs it in the image)."""
    import json
    import subprocess
    import sys

    from ascend_build.images.checks import RESOLVE_SCRIPT, read_resolved
    root = tmp_path / "root"
    (root / TREE.lstrip("/") / "compiler/ccec_compiler/bin").mkdir(parents=True)
    (root / TREE.lstrip("/") / "bin").mkdir()
    (root / LINK.lstrip("/")).parent.mkdir(parents=True)
    (root / LINK.lstrip("/")).symlink_to("../cann-8.5.0")
    paths = [f"{root}{p}" for p in (f"{LINK}/compiler/ccec_compiler/bin", f"{TREE}/compiler/ccec_compiler/bin",
                                    f"{LINK}/bin", f"{TREE}/tools/gone/bin")]
    out = subprocess.run([sys.executable, "-c", RESOLVE_SCRIPT, json.dumps(paths)], capture_output=True, text=True,
                         check=True)
    return root, read_resolved(out.stdout)


def test_a_folder_reached_through_the_latest_link_is_no_gap(tmp_path):
    from ascend_build.images.checks import Resolved, sourcing_changes
    root, seen = _tree(tmp_path)
    link, tree = f"{root}{LINK}", f"{root}{TREE}"
    assert seen[f"{link}/bin"] == Resolved(f"{tree}/bin", (f"{link} -> ../cann-8.5.0",))
    assert seen[f"{tree}/bin".replace("/bin", "/compiler/ccec_compiler/bin")].links == ()
    set_env = dict(SET_ENV, PATH=f"{tree}/compiler/ccec_compiler/bin:/usr/bin")
    image = dict(SET_ENV, PATH=f"/opt/venv/bin:{link}/compiler/ccec_compiler/bin:/usr/bin")
    # as strings (before issue 78): a gap, though the image's PATH has the folder through the link
    assert env_gaps(set_env, image) == [f"image ENV PATH lacks {tree}/compiler/ccec_compiler/bin: no entry of the "
                                        f"image's PATH reaches that folder"]
    assert env_gaps(set_env, image, seen=seen) == []
    assert sourcing_changes({"PATH": image["PATH"]}, {"PATH": f"{set_env['PATH']}:{image['PATH']}"}, seen) == []
    assert sourcing_changes({"PATH": image["PATH"]}, {"PATH": f"{set_env['PATH']}:{image['PATH']}"}) != []


def test_a_real_gap_names_the_entry_and_the_link_it_goes_through(tmp_path):
    from ascend_build.images.checks import gap_fix
    root, seen = _tree(tmp_path)
    link, tree = f"{root}{LINK}", f"{root}{TREE}"
    set_env = dict(SET_ENV, PATH=f"{link}/bin:{tree}/tools/gone/bin")
    image = dict(SET_ENV, PATH=f"{tree}/bin:/usr/bin")
    assert env_gaps(set_env, image, seen=seen) == [
        f"image ENV PATH lacks {tree}/tools/gone/bin: no entry of the image's PATH reaches that folder"]
    image = dict(SET_ENV, PATH="/usr/bin")
    gaps = env_gaps(set_env, image, seen=seen)
    assert gaps[0] == (f"image ENV PATH lacks {link}/bin (the folder {tree}/bin, through {link} -> ../cann-8.5.0): "
                       f"no entry of the image's PATH reaches that folder")
    fix = gap_fix("8.5.0", "Ascend/cann-container-image c5a67b3a")
    assert "cann.8.5.0.env" in fix and "`invoke update --cann-images DIR`" in fix and "--keep-failed" in fix
