"""What keeping the chats costs: the GUI thread's time per save of a streaming reply, and a search.

    python bench/chat_history.py [--chats 100,1000,5000] [--repeat 20] [--smoke]

A real SQLite file in a temp folder (the store of :mod:`gui.cluster.chat.history`, WAL mode).

* *Save while streaming*: a reply grows to each length in the table; every throttled save writes
  the whole reply so far in one transaction. The median and the slowest save are what a token
  arriving at that moment waits (at most two saves a second, see ``SAVE_EVERY_SECONDS``).
* *Search*: a history of ``--chats`` chats of ten messages (about 500 characters each); the
  median time of a search for a word in one chat's text (found) and one in none (a full scan).

``--smoke`` runs tiny sizes once, to check the benchmark itself still runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gui.cluster.chat.conversation import Conversation
from gui.cluster.chat.history import ChatStore


def save_times(folder: Path, lengths: list[int], repeat: int) -> list[tuple]:
    """Median and slowest save of a reply of each length (characters)."""
    store = ChatStore(folder / "saves.sqlite3")
    rows = []
    try:
        conv = Conversation()
        rec = store.record(conv)
        conv.add_user("Tell me a long story")
        conv.begin_reply()
        for length in lengths:
            conv.messages[-1].content = "word " * (length // 5)
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                store.save_message(rec.chat_id, 1, conv.messages[-1])
                times.append((time.perf_counter() - t0) * 1000)
            rows.append((f"{length:,} chars", statistics.median(times), max(times)))
        conv.finish("stop")
        rec.close()
    finally:
        store.close()
    return rows


def search_times(folder: Path, chats: int, repeat: int) -> tuple:
    """Median time of a search that finds one chat and of one that finds none, in ``chats`` chats."""
    store = ChatStore(folder / f"search-{chats}.sqlite3")
    try:
        filler = " ".join(f"word{j}" for j in range(80))
        for i in range(chats):
            conv = Conversation()
            rec = store.record(conv)
            for turn in range(5):
                conv.add_user(f"Question {turn} of chat {i}: {filler}")
                conv.begin_reply()
                conv.append(f"Answer {turn} of chat {i}: {filler} needle{i}.")
                conv.finish("stop")
            rec.close()
        found, missing = [], []
        for _ in range(repeat):
            t0 = time.perf_counter()
            assert len(store.chats(f"needle{chats // 2}.")) == 1
            found.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            assert store.chats("no such word anywhere") == []
            missing.append((time.perf_counter() - t0) * 1000)
        return chats, statistics.median(found), statistics.median(missing)
    finally:
        store.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chats", default="100,1000,5000", help="history sizes to search, comma-separated")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, once")
    args = ap.parse_args(argv)
    sizes = [10] if args.smoke else [int(n) for n in args.chats.split(",")]
    repeat = 1 if args.smoke else args.repeat
    lengths = [1000] if args.smoke else [1_000, 8_000, 32_000, 128_000]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        print("Save while streaming (one transaction, the whole reply so far)")
        print(f"{'reply':>14} {'median ms':>10} {'slowest ms':>11}")
        for name, median, worst in save_times(folder, lengths, repeat):
            print(f"{name:>14} {median:>10.2f} {worst:>11.2f}")
        print()
        print("Search (LIKE over titles and every message)")
        print(f"{'chats':>8} {'found ms':>9} {'none ms':>8}")
        for size in sizes:
            chats, found, missing = search_times(folder, size, repeat)
            print(f"{chats:>8} {found:>9.2f} {missing:>8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
