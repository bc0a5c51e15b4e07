"""Builds libvoxconv.so with the repository's Makefile and bundles it into the package.

`pip install ./python` from the repository root. The library is built against this
machine's OpenBLAS and (when nvcc is found) CUDA toolkit; VOXCONV_LIBRARY at run time
points the package at another build instead."""
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = os.environ.get("VOXCONV_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


class BuildWithLibrary(build_py):
    def run(self):
        jobs = str(os.cpu_count() or 2)
        subprocess.check_call(["make", "-C", ROOT, "-j" + jobs, "deps", "build/libvoxconv.so"])
        super().run()
        dst = os.path.join(self.build_lib, "voxconv")
        os.makedirs(dst, exist_ok=True)
        shutil.copy2(os.path.join(ROOT, "build", "libvoxconv.so"), os.path.join(dst, "libvoxconv.so"))


class BinaryDistribution(Distribution):
    def has_ext_modules(self):  # a platform wheel: it carries a shared library
        return True


setup(cmdclass={"build_py": BuildWithLibrary}, distclass=BinaryDistribution)
