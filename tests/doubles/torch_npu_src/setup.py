# STAND-IN torch_npu (test double): one C extension that records its compiler.
import os

from setuptools import Extension, setup

setup(
    name="torch_npu",
    version=os.environ.get("STANDIN_VERSION", "2.1.0.post8+standin"),
    packages=["torch_npu"],
    ext_modules=[Extension("torch_npu._standin", ["csrc/standin.c"])],
)
