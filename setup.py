# SPDX-License-Identifier: Apache-2.0
"""pip's build of gradref (the metadata is in pyproject.toml): libgradref is configured and built
with CMake (library only, Release) and its shared object is copied into the package, where
gradref._lib finds it next to itself. The wheel is therefore platform-specific."""
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from wheel.bdist_wheel import bdist_wheel

ROOT = os.path.dirname(os.path.abspath(__file__))


class BuildWithLibrary(build_py):
    """build_py, then CMake's build of the shared library into the package."""

    def run(self):
        super().run()
        tree = os.path.join(os.path.abspath(self.build_lib), "..", "gradref-cmake")
        configure = ["cmake", "-S", ROOT, "-B", tree, "-DCMAKE_BUILD_TYPE=Release",
                     "-DGRADREF_BUILD_TESTS=OFF", "-DBUILD_TESTING=OFF",
                     "-DGRADREF_BUILD_EXAMPLES=OFF", "-DGRADREF_BUILD_BENCH=OFF",
                     "-DGRADREF_INSTALL_PYTHON=OFF"]
        subprocess.check_call(configure)
        jobs = str(os.cpu_count() or 2)
        subprocess.check_call(["cmake", "--build", tree, "--target", "gradref_shared",
                               "-j", jobs])
        real = os.path.realpath(os.path.join(tree, "libgradref.so"))
        target = os.path.join(self.build_lib, "gradref", "libgradref.so")
        shutil.copyfile(real, target)
        os.chmod(target, 0o755)


class PlatformWheel(bdist_wheel):
    """The package carries a shared object, loaded by ctypes: a wheel for this platform and any
    Python 3 (py3-none-<platform>), not a pure one."""

    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        return ("py3", "none") + tuple(super().get_tag()[2:])


setup(cmdclass={"build_py": BuildWithLibrary, "bdist_wheel": PlatformWheel})
