import sys

from .main import main

if __name__ == "__main__":   # not again in check --jobs workers, which import the main module
    sys.exit(main())
