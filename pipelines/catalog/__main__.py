"""``python -m pipelines.catalog derive-traces SRC [DATA_DIR]`` (:func:`pipelines.catalog.shipped.main`)."""

import sys

from pipelines.catalog.shipped import main

sys.exit(main())
