"""The C search kernel; everything else is configured in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("fastsubs.query._kernel", sources=["query/_kernel.c"])])
