"""python -m rematlab record|plan|predict (rematlab/cli.py)."""
import sys

from .cli import main

sys.exit(main())
