"""``python -m flycuda replay ...`` (also what torchrun launches)."""

import sys

from .cli.main import main

sys.exit(main())
