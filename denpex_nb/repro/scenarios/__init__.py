"""One module per scenario: ``ID``, ``TITLE``, ``TEACHES``, ``broken``, ``fixed``, ``expected``.

Registered in :data:`denpex_nb.repro.registry.SCENARIO_MODULES`. Modules import torch only inside
their functions.
"""
