"""`python -m perfsuite.coverage [--model ...] [--format text|md|json]`: see perfsuite.commands.coverage."""

import sys

from perfsuite.commands.coverage import main

sys.exit(main())
