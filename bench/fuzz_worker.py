"""A long-lived fuzz worker: one process, one EGL context, cases in and outcomes out (JSON lines).

    python bench/fuzz_worker.py SEED MEM_MB

sets RLIMIT_AS to MEM_MB MiB, creates its Renderer, prints {"ready": true}, then for each line
{"case": i} on stdin runs case i of SEED (`fuzz_case`) and prints {"case": i, "outcome": ...,
"type": ..., "message": ...}. A MemoryError (the address-space cap) is reported as outcome "cap"
and ends the worker (its state is suspect); the parent starts a fresh one. Hangs and crashes are
the parent's to see (no line before the deadline; end of file).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import traceback
from pathlib import Path

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
os.environ.setdefault("LP_NUM_THREADS", "1")  # llvmpipe: one rasteriser thread, leave the cores to others

from fuzz_case import corpus_files, plan, run_case  # noqa: E402
from fuzz_mutate import KINDS  # noqa: E402

from renderer.errors import FormatError  # noqa: E402


def outcome(index: int, seed: int, files, renderer) -> dict:
    try:
        path, data, rng = plan(seed, index, files)
        run_case(path, data, rng, renderer)
    except FormatError as e:
        return {"case": index, "outcome": "FormatError", "type": "FormatError", "message": str(e)[:300]}
    except MemoryError:
        return {"case": index, "outcome": "cap", "type": "MemoryError", "message": ""}
    except Exception as e:  # noqa: BLE001 - every other exception is what the harness reports
        tb = traceback.extract_tb(e.__traceback__)
        where = f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
        return {"case": index, "outcome": "exception", "type": type(e).__name__,
                "message": f"{str(e)[:240]} ({where})", "path": str(path) if "path" in locals() else ""}
    return {"case": index, "outcome": "ok", "kind": KINDS[path.suffix.lower()][0]}


def main() -> None:
    seed, mem_mb = int(sys.argv[1]), int(sys.argv[2])
    cap = mem_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    from renderer.frame import Renderer

    renderer = Renderer()
    renderer.context  # noqa: B018 - create the EGL context now, not inside the first case
    files = corpus_files()
    print(json.dumps({"ready": True, "files": len(files)}), flush=True)
    for line in sys.stdin:
        index = json.loads(line)["case"]
        result = outcome(index, seed, files, renderer)
        print(json.dumps(result), flush=True)
        if result["outcome"] == "cap":
            break


if __name__ == "__main__":
    main()
