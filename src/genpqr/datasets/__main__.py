"""``python -m genpqr.datasets [NAME ...]``: print the path of each shipped data set named (all
of them, one ``NAME PATH`` line each, without a name)."""

import sys

from . import DATASETS, path


def main(argv=None) -> int:
    names = sys.argv[1:] if argv is None else list(argv)
    unknown = [n for n in names if n not in DATASETS]
    if unknown:
        print(f"python -m genpqr.datasets: error: unknown data set(s) {unknown}; choose among {sorted(DATASETS)}",
              file=sys.stderr)
        return 2
    for name in names:
        print(path(name))
    if not names:
        for name in DATASETS:
            print(f"{name} {path(name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
