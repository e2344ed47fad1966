"""`python -m perfsuite.coverage [--model ...] [--format text|md|json]`: see perfsuite.coverage.command."""

import sys

from perfsuite.coverage.command import main

sys.exit(main())
