"""One diagnosis per input per test process, shared by the test files that read the same evidence.

The wild corpus is diagnosed by ``test_wild`` (scored against the recorded benchmark run) and by
``test_catalog`` (every class it emits is a catalog id); the recorded runs by ``test_closed_loop``
(against their manifests) and ``test_catalog``. Each input is diagnosed once here, as a user would
(``load`` then ``diagnose``) and strict (a rule that fails is an error, not a note), by whichever test
asks first, so no test depends on another's order. The tests only read a :class:`Diagnosis`.
"""

from __future__ import annotations

import functools


def diagnosed(*paths):
    """``diagnose(load(*paths), strict=True)``, made once per test process for these paths."""
    return _diagnosed(tuple(str(p) for p in paths))


@functools.cache
def _diagnosed(paths: tuple[str, ...]):
    import denpex_nb as dx

    return dx.diagnose(dx.load(*paths, progress=False), strict=True)
