# STAND-IN NVIDIA apex setup.py (test double): takes apex's --cpp_ext, which builds apex_C.
import sys

VERSION = "0.1"
from setuptools import Extension, setup  # noqa: E402

flags = [a for a in sys.argv if (a.startswith("--") and a.endswith("_ext")) or a == "--npu_float_status"]
sys.argv = [a for a in sys.argv if a not in flags]
# Ascend apex's build.sh passes --cpp_ext alone since 6cdd5ea3 (no --npu_float_status)
assert flags == ["--cpp_ext"], flags
EXTENSIONS = [Extension("apex_C", ["csrc/flatten_unflatten.c"])]
setup(name="apex", version=VERSION, packages=["apex", "apex.contrib"], ext_modules=EXTENSIONS)
