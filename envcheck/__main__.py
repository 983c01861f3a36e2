"""``python -m envcheck`` works like the console script."""

from envcheck.cli import main

if __name__ == "__main__":
    main()
