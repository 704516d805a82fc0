"""Fail unless the wheel given holds the package alone: ``gpflow_fastvi/`` (with its ``py.typed``
and bundled data) and the wheel's own metadata, nothing from beside the package."""

import sys
import zipfile

ALLOWED = "gpflow_fastvi"
REQUIRED = ["gpflow_fastvi/__init__.py", "gpflow_fastvi/py.typed", "gpflow_fastvi/cli.py"]


def main(path: str) -> int:
    names = zipfile.ZipFile(path).namelist()
    tops = {name.split("/", 1)[0] for name in names}
    stray = sorted(t for t in tops if t != ALLOWED and not t.endswith(".dist-info"))
    missing = [name for name in REQUIRED if name not in names]
    data = [name for name in names if name.startswith("gpflow_fastvi/datasets/data/")]
    if stray or missing or not data:
        print(
            f"{path}: outside the package {stray}; missing {missing}; bundled data files {len(data)}"
        )
        return 1
    print(f"{path}: {len(names)} files, all under {ALLOWED}/ or the wheel's metadata")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
