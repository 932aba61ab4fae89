# STAND-IN NVIDIA apex setup.py (test double): takes apex's extension flags.
import sys

VERSION = "0.1"
from setuptools import Extension, setup  # noqa: E402

flags = [a for a in sys.argv if a in ("--cpp_ext", "--npu_float_status")]
sys.argv = [a for a in sys.argv if a not in flags]
assert flags == ["--cpp_ext", "--npu_float_status"], flags
setup(name="apex", version=VERSION, packages=["apex", "apex.contrib"],
      ext_modules=[Extension("apex._standin", ["csrc/standin.c"])])
