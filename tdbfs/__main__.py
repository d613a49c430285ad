"""`python -m tdbfs`: the tdbfs command."""

from .cli import run

if __name__ == "__main__":
    run()
