"""Import the built-in readers so they register themselves (see :mod:`denpex_nb.ingest.base`)."""
from . import c10d, nccl, python, frtrace_text, flight_recorder, trace  # noqa: F401
