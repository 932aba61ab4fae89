# STAND-IN torch_npu setup.py (test double): the real one's steps, in miniature.
import os
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

BASE = os.path.dirname(os.path.abspath(__file__))
VERSION = '2.1.0.post8'
SUBMODULES = ["third_party/op-plugin"]


def check_submodules():
    empty = [s for s in SUBMODULES if not os.path.isdir(os.path.join(BASE, s)) or not os.listdir(os.path.join(BASE, s))]
    if len(empty) == len(SUBMODULES):
        print("standin: every submodule folder is empty: git submodule update (fails offline)")
        if subprocess.call(["git", "submodule", "update", "--init", "--recursive"], cwd=BASE) != 0:
            print("standin: submodules could not be fetched")
            sys.exit(1)


def write_version():
    global VERSION
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=BASE, capture_output=True, text=True).stdout.strip() \
        or "Unknown"
    if os.getenv("BUILD_WITHOUT_SHA") is None:
        VERSION += "+git" + sha[:7]
    with open(os.path.join(BASE, "torch_npu", "version.py"), "w") as f:
        f.write(f"__version__ = '{VERSION}'\ngit_version = {sha!r}\n")


class Build(build_ext):
    def run(self):
        build = os.path.join(BASE, "build", "cmake")
        os.makedirs(build, exist_ok=True)
        args = ["-DCMAKE_BUILD_TYPE=Release", f"-DBUILD_TORCHAIR={'OFF' if os.getenv('DISABLE_INSTALL_TORCHAIR') == 'TRUE' else 'ON'}",
                f"-DBUILD_TENSORPIPE={'ON' if os.getenv('DISABLE_RPC_FRAMEWORK', 'FALSE') == 'FALSE' else 'OFF'}"]
        subprocess.check_call(["cmake", BASE] + args, cwd=build)
        subprocess.check_call(["make", "-j2"], cwd=build)
        lib = os.path.join(BASE, "torch_npu", "lib")
        os.makedirs(lib, exist_ok=True)
        subprocess.check_call(["cp", os.path.join(build, "libtorch_npu.so"), lib])
        super().run()


if "clean" not in sys.argv:
    check_submodules()
    write_version()
    subprocess.check_call([sys.executable, os.path.join(BASE, "codegen", "gen.py")])
    subprocess.check_call(["sh", os.path.join(BASE, "third_party", "acl", "libs", "build_stub.sh")])

setup(
    name="torch_npu",
    version=VERSION,
    packages=["torch_npu"],
    package_data={"torch_npu": ["lib/*.so"]},
    ext_modules=[Extension("torch_npu._standin", ["csrc/standin.c"], extra_link_args=["-Wl,-rpath,$ORIGIN/lib"])],
    cmdclass={"build_ext": Build},
)
