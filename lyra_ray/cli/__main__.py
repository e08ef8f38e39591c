"""``python -m lyra_ray.cli``: the same as the ``lyra`` script."""

import sys

from lyra_ray.cli.main import main

sys.exit(main())
