"""Write the model zoo (sparse GGUFs with real shapes, no download) into a directory (run it through
scripts/make_zoo): every model in every quantization it offers, or those named."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    from app.core.bench.zoo import ZOO, quants_for, zoo_path

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("directory", type=Path)
    ap.add_argument("--models", nargs="*", default=list(ZOO), choices=list(ZOO))
    ap.add_argument("--quants", nargs="*", default=None, help="default: all the model offers")
    args = ap.parse_args()
    for key in args.models:
        for quant in args.quants or quants_for(ZOO[key]):
            if quant not in quants_for(ZOO[key]):
                continue
            path = zoo_path(key, quant, args.directory)
            st = path.stat()
            print(f"{path}  {st.st_size / 1e9:.2f} GB apparent, {st.st_blocks * 512 / 1e6:.1f} MB on disk")
    return 0


if __name__ == "__main__":
    sys.exit(main())
