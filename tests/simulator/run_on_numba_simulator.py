"""Run the conformance cases on numba's own simulator and save their outputs.

    NUMBA_ENABLE_CUDASIM=1 python tests/run_on_numba_simulator.py OUT.npz

numba reads NUMBA_ENABLE_CUDASIM when it is first imported, so this runs in its
own process (started by `test_simulator_conformance`); it never imports
gpucourse. A case that fails is recorded as an error instead of stopping the rest.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

import numpy as np


def main(path: str) -> None:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        raise SystemExit("run with NUMBA_ENABLE_CUDASIM=1, so that numba's simulator runs the kernels")
    from conformance_kernels import conformance_cases  # noqa: PLC0415 (after the environment check)

    outputs, errors = {}, {}
    for case in conformance_cases():
        try:
            outputs.update(case.run())
        except Exception:
            errors[case.name] = traceback.format_exc(limit=3)
    np.savez(path, __errors__=np.array(json.dumps(errors)), **outputs)


if __name__ == "__main__":
    main(sys.argv[1])
