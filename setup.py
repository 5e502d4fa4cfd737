"""Builds the symphony Python package: the pure-Python files of
bindings/python/symphony and the compiled module symphony._core, built by
CMake (target symphony_python) in build/pip, or taken from an existing build
tree when SYMPHONY_BUILD_DIR names one (e.g. build/release).

    /usr/bin/python3 -m pip install --no-build-isolation .
    SYMPHONY_BUILD_DIR=build/release /usr/bin/python3 -m pip install --no-build-isolation .
"""

import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeBuild(build_ext):
    """Builds symphony._core with the project's CMake (Ninja when present)."""

    def build_extension(self, ext):
        build_dir = os.environ.get("SYMPHONY_BUILD_DIR")
        if build_dir:
            build_dir = os.path.abspath(build_dir)
            if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
                sys.exit(f"SYMPHONY_BUILD_DIR={build_dir} is not a configured CMake build tree")
        else:
            build_dir = os.path.join(ROOT, "build", "pip")
            args = [
                "cmake", "-S", ROOT, "-B", build_dir,
                "-DCMAKE_BUILD_TYPE=Release",
                "-DSYMPHONY_BUILD_PYTHON=ON",
                "-DSYMPHONY_BUILD_TESTS=OFF",
                "-DSYMPHONY_BUILD_BENCH=OFF",
                "-DSYMPHONY_BUILD_TOOLS=OFF",
                f"-DPython_EXECUTABLE={sys.executable}",
            ]
            if shutil.which("ninja"):
                args += ["-G", "Ninja"]
            subprocess.run(args, check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", "2")
        subprocess.run(["cmake", "--build", build_dir, "--target", "symphony_python", "-j", jobs], check=True)
        built = glob.glob(os.path.join(build_dir, "bindings", "python", "symphony", "_core*.so"))
        if len(built) != 1:
            sys.exit(f"expected one symphony/_core*.so in {build_dir}/bindings/python, found {built}")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built[0], target)


setup(
    packages=["symphony"],
    package_dir={"": "bindings/python"},
    package_data={"symphony": ["py.typed", "*.pyi"]},
    ext_modules=[Extension("symphony._core", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
