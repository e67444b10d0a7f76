"""``python -m flycuda replay ...`` (also what torchrun launches)."""

import sys

from .cli import main

sys.exit(main())
