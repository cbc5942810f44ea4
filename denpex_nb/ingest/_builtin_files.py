"""Import the built-in *file* readers (dumps and structured files) so they register themselves.

Why apart from :mod:`._builtin`: a load of Flight Recorder dumps only needs these; the text
readers' modules (c10d, nccl, python, ...) compile ~100 regular expressions on import (~0.09 s of
CPU per process), so they are imported on the first text file (:func:`.base.text_readers`).
The order is the file registry's order, which is the order file readers are tried in: keep it.
"""

# isort: skip_file
from . import manifest, flight_recorder, trace  # noqa: F401
