"""The builder image suite, run by `invoke builder` before it tags a builder."""
from __future__ import annotations

import re

from packaging.version import Version


def test_the_image_says_it_is_a_builder(labels):
    from tests.conftest import label
    assert label(labels, "kind") == "builder"


def test_gcc_major_is_the_matrix_value(host, bcell):
    for var in ("CC", "CXX"):
        out = host.run(f'"${var}" -dumpfullversion -dumpversion')
        assert out.rc == 0, out.stderr
        assert int(out.stdout.strip().split(".")[0]) == bcell.gcc, f"${var} is {out.stdout.strip()}"


def test_compilers_go_through_ccache(host):
    resolved = host.run('readlink -f "$(command -v "$CC")"').stdout.strip()
    assert resolved.endswith("/ccache"), f"$CC resolves to {resolved}, not ccache"
    assert host.run("ccache --version").rc == 0


def test_cmake_git_patch(host):
    version = re.search(r"cmake version (\S+)", host.run("cmake --version").stdout)
    assert version and Version(version.group(1)) >= Version("3.18")
    assert host.run("git --version").rc == 0
    assert host.run("patch --version").rc == 0


def test_each_python_has_torch_of_the_stack(host, bcell):
    for minor in bcell.pythons:
        python = f"/opt/venvs/py{minor}/bin/python{minor}"
        assert host.file(python).exists, python
        out = host.run(f"{python} -c 'import sys, torch; print(\"%d.%d\" % sys.version_info[:2], torch.__version__)'")
        assert out.rc == 0, out.stderr
        got_python, got_torch = out.stdout.split()
        assert got_python == minor
        assert Version(got_torch).base_version == bcell.torch.version


def test_each_python_has_what_a_setup_py_build_imports(host, bcell):
    """setuptools (the one that still imports on this Python), wheel, yaml and numpy."""
    for minor in bcell.pythons:
        python = f"/opt/venvs/py{minor}/bin/python{minor}"
        out = host.run(f"{python} -c 'import setuptools, wheel, yaml, numpy; "
                       f"from setuptools import Extension, setup; print(setuptools.__version__)'")
        assert out.rc == 0, out.stderr


def test_a_cross_builder_compiles_for_the_image_outside_qemu(host, labels):
    """compile-on=cross: every name a build calls (CC, plain gcc and g++ in stub scripts,
    cc) is the cross compiler through its ccache; it makes aarch64 code, and its compiler
    proper is a program of the build machine (ELF machine not aarch64)."""
    from ascend_build.images.kinds import LABEL_PREFIX
    if labels.get(f"{LABEL_PREFIX}.compile-on", "native") != "cross":
        out = host.run('od -An -j18 -N2 -tu2 "$($CC -print-prog-name=cc1)"')
        assert out.rc == 0 and out.stdout.strip() in ("183", "62"), out.stdout    # its own machine's gcc
        return
    for name in ("$CC", "$CXX", "gcc", "g++", "cc", "c++"):
        assert host.run(f'{name} -dumpmachine').stdout.strip() == "aarch64-linux-gnu", name
        resolved = host.run(f'readlink -f "$(command -v {name})"').stdout.strip()
        assert resolved == "/opt/cross/bin/ccache", f"{name} resolves to {resolved}"
    machine = host.run('od -An -j18 -N2 -tu2 "$($CC -print-prog-name=cc1)"').stdout.strip()
    assert machine != "183", "the cross compiler's cc1 is an aarch64 program"
    out = host.run("printf 'int main(void) { return 0; }\\n' > /tmp/x.c && gcc -o /tmp/x /tmp/x.c && /tmp/x "
                   "&& od -An -j18 -N2 -tu2 /tmp/x")
    assert out.rc == 0 and out.stdout.strip() == "183", out.stderr
    # links as the image's own gcc does: Debian's cross gcc alone passes --as-needed, which
    # drops the NEEDED entries of libraries no symbol is taken from
    out = host.run("printf 'int f(void) { return 1; }\\n' > /tmp/l.c && CCACHE_DISABLE=1 gcc -shared -fPIC "
                   "-o /tmp/l.so /tmp/l.c -lm && readelf -d /tmp/l.so")
    assert out.rc == 0 and "[libm.so.6]" in out.stdout, out.stdout + out.stderr


def test_libraries_record_their_rpath_as_the_manylinux_toolchains_do(host, bcell):
    """$ORIGIN paths as DT_RPATH, searched before LD_LIBRARY_PATH (a runtime image puts CANN's
    lib64 there, with a libnpu_profiler.so of its own), not DT_RUNPATH, searched after."""
    out = host.run("printf 'int f(void) { return 1; }\\n' > /tmp/r.c && CCACHE_DISABLE=1 $CC -shared -fPIC "
                   "-o /tmp/r.so /tmp/r.c ${LDFLAGS:-} -Wl,-rpath,'$ORIGIN/lib' && readelf -d /tmp/r.so")
    assert out.rc == 0, out.stderr
    assert "(RPATH)" in out.stdout and "(RUNPATH)" not in out.stdout, out.stdout
