"""The C part of the build; everything else is in pyproject.toml.

`projections/change_records.c` builds the change feed's records, `projections/key_packing.c`
packs keys, `projections/memory_access.c` gets and puts the in-process state, and
`streams/batch_access.c` gets and puts the worker's state in its batches: one C call each (each
file says why). Here rather than in pyproject.toml, where setuptools still calls
extension modules experimental.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("projections.change_records", ["projections/change_records.c"]),
        Extension("projections.key_packing", ["projections/key_packing.c"]),
        Extension("projections.memory_access", ["projections/memory_access.c"]),
        Extension("streams.batch_access", ["streams/batch_access.c"]),
    ],
)
