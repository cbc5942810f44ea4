"""Import the built-in readers so they register themselves (see :mod:`denpex_nb.ingest.base`).

The order is the registry's order, which is the order readers are tried in: keep it.
"""

# isort: skip_file
from . import manifest, c10d, nccl, nccl_tests, python, horovod, frtrace_text, flight_recorder, trace  # noqa: F401
