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
