"""The native Record (static_consumer/_base/records/native.c), built at install when a C compiler is there.

Optional: without a compiler the install goes on and static_consumer uses its pure-Python Record, which
behaves the same (docs/benchmarks.md, "Record"). Everything else is configured in pyproject.toml.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "static_consumer._base.records.native",
            sources=["static_consumer/_base/records/native.c"],
            optional=True,
        )
    ]
)
