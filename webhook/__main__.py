"""``python -m webhook``: same as the ``snapready`` console script."""

import sys

from webhook.cli import main

sys.exit(main())
