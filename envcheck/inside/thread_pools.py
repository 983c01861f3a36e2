"""The thread pools (OpenMP, BLAS) as threadpoolctl sees them, when the target has it."""

import os


def thread_pools():
    """threadpoolctl's view, imported *after* torch and with KMP_DUPLICATE_LIB_OK restored: threadpoolctl
    sets it at import, which would hide Intel OpenMP's Error #15 from everything that runs later."""
    before = os.environ.get("KMP_DUPLICATE_LIB_OK")
    try:
        import threadpoolctl
    except Exception:
        return None
    finally:
        if before is None:
            os.environ.pop("KMP_DUPLICATE_LIB_OK", None)
        else:
            os.environ["KMP_DUPLICATE_LIB_OK"] = before
    try:
        info = threadpoolctl.threadpool_info()
    except Exception:
        return None
    return [
        {
            "user_api": str(p.get("user_api")),
            "internal_api": str(p.get("internal_api")),
            "filepath": str(p.get("filepath")),
            "version": p.get("version"),
            "num_threads": p.get("num_threads"),
        }
        for p in info
    ]
