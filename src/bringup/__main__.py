"""``python -m bringup``."""

from bringup.cli.main import entry

if __name__ == "__main__":
    entry()
