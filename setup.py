"""The C part of the build; everything else is in pyproject.toml.

`projections/change_records.c` builds the change feed's records, one C call each
(`projections/changes.py` says why), and `projections/key_packing.c` packs keys, one C call each
(it says why). Here rather than in pyproject.toml, where setuptools still calls extension
modules experimental.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("projections.change_records", ["projections/change_records.c"]),
        Extension("projections.key_packing", ["projections/key_packing.c"]),
    ],
)
