"""A writer for ``test_store_crash.py``: commits to a StateStore in a loop until killed.

Run as ``python -m tests.unit.store_crash_writer STATE_DIR START``. Each iteration
enqueues a submission (with a token), then commits in one transaction: the state
(a sequence number, a ~1 MB payload and its digest, running totals), the inbox rows it
consumes and three archive rows. It prints ``begin N`` before and ``done N`` after the
commit, so the parent knows what was acknowledged and whether its SIGKILL landed
inside a transaction.
"""

from __future__ import annotations

import hashlib
import sys

from lyra_ray.runtime.store import StateStore


def main(state_dir: str, start: int) -> None:
    store = StateStore(state_dir)
    saved = store.load() or {"n": start, "archived": 0, "consumed": 0}
    n, archived, consumed = int(saved["n"]), int(saved["archived"]), int(saved["consumed"])
    while True:
        n += 1
        store.enqueue("submit", f"job-{n}", {"n": n}, token=f"tok-{n}")
        rows = [seq for seq, _k, _j, _p in store.pending()]
        blob = hashlib.sha256(str(n).encode()).hexdigest() * (2**20 // 64)
        state = {
            "n": n,
            "blob": blob,
            "digest": hashlib.sha256(blob.encode()).hexdigest(),
            "archived": archived + 3,
            "consumed": consumed + len(rows),
        }
        print(f"begin {n}", flush=True)
        store.commit(state, rows, [(f"j{n}-{k}", {"n": n, "k": k}) for k in range(3)])
        archived, consumed = archived + 3, consumed + len(rows)
        print(f"done {n}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
