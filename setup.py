"""The C part of the build; everything else is in pyproject.toml.

`projections/change_records.c` builds the change feed's records, one C call each
(`projections/changes.py` says why). Here rather than in pyproject.toml, where setuptools still
calls extension modules experimental.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[Extension("projections.change_records", ["projections/change_records.c"])],
)
