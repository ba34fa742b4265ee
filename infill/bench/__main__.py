import sys

from infill.bench.cli import main

sys.exit(main())
