# STAND-IN Ascend apex (test double).
from setuptools import Extension, setup

setup(
    name="apex",
    version="0.1+ascend",
    packages=["apex_standin"],
    ext_modules=[Extension("apex_standin._standin", ["apex_standin/standin.c"])],
)
