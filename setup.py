"""The one compiled part of the package: the Flight Recorder decoder's kernels in C.

Everything else is declared in pyproject.toml. The extension is optional: without a C compiler the
install still succeeds and dumps are decoded by the numba kernels (the ``fast`` extra) or the
restricted unpickler (see denpex_nb/ingest/pickle_nodes.py, ``backend()``).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "denpex_nb.ingest.frdecode",
            ["denpex_nb/ingest/frdecode.c"],
            optional=True,
            extra_compile_args=["-O3"],
        )
    ]
)
