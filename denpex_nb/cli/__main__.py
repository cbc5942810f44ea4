"""``python -m denpex_nb.cli``: the same as the ``denpex-nb`` command."""

import sys

from . import main

sys.exit(main())
