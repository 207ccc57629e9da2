"""``python -m devtools.chaos``: run the chaos soak (options: ``--help``)."""

import sys

from devtools.chaos.run import main

sys.exit(main())
