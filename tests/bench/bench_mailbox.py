"""Mailbox benchmark: the peak memory of autoindexing one large mbox, against a process that only reads it whole.

Run: python tests/bench/bench_mailbox.py [--mib 512] [--text-mib 48]

Two generated mailboxes, each autoindexed by a fresh process (a brain of its own):

* a mail export as people have them (``--mib``): most of its bytes are
  attachments, as a Gmail Takeout ``.mbox``'s are (nine messages in ten carry a
  base64 photo of 100-600 KB of random bytes, the tenth is text only; half of
  the messages reply to an earlier one);
* a mailing-list archive (``--text-mib``): every message text, no attachments.

The baseline is a fresh process that reads the same file with
``Path.read_bytes()`` and exits: the least a parser of the whole file holds. The
figure is the run's peak RSS (``VmHWM``, with the peak of its and its workers'
RSS added up at one instant), the ratio the run's peak over the baseline's; the
run also prints its rate. xerj reads a mailbox through a memory map a message at
a time (``xerj_core.autoindex.mapped``), so the export's attachments are never
held, whatever ``--max-file-mib`` says.
"""

from __future__ import annotations

import argparse
import base64
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_autoindex import RSS_CHILD

WORDS = [f"w{i}" for i in range(3000)] + "the mail thread report meeting draft invoice photo trip".split()

READ_WHOLE = """
from pathlib import Path
from xerj_core.store.residency import peak_rss_mb
data = Path({path!r}).read_bytes()
print(len(data), peak_rss_mb())
"""


def _message(rng: random.Random, n: int, attachment: int) -> bytes:
    """Message ``n``: a text reply to an earlier one (or a new thread), with an attachment of ``attachment``
    random bytes when that is not 0."""
    words = " ".join(rng.choices(WORDS, k=rng.randrange(40, 400)))
    lines = [
        f"From sender{n % 97}@example.org Mon Jan  6 10:{n % 60:02d}:00 2025",
        f"From: Sender {n % 97} <sender{n % 97}@example.org>",
        "To: me@example.org",
        f"Subject: {' '.join(rng.choices(WORDS, k=5))}",
        f"Message-ID: <{n}@example.org>",
        f"Date: Mon, 06 Jan 2025 10:{n % 60:02d}:00 +0000",
        "MIME-Version: 1.0",
    ]
    if n and rng.random() < 0.5:
        lines.append(f"In-Reply-To: <{rng.randrange(n)}@example.org>")
    if not attachment:
        lines += ["Content-Type: text/plain; charset=utf-8", "", words, ""]
        return "\n".join(lines).encode()
    payload = base64.encodebytes(rng.randbytes(attachment)).decode()
    lines += ['Content-Type: multipart/mixed; boundary="b"', "", "--b", "Content-Type: text/plain; charset=utf-8", "",
              words, "--b", f'Content-Type: image/jpeg; name="photo-{n}.jpg"',
              f'Content-Disposition: attachment; filename="photo-{n}.jpg"', "Content-Transfer-Encoding: base64", "",
              payload, "--b--", ""]
    return "\n".join(lines).encode()


def generate(path: Path, mib: int, attachments: bool, seed: int = 5) -> int:
    """A mailbox of about ``mib`` MiB at ``path``; its message count."""
    rng = random.Random(seed)
    target, n = mib << 20, 0
    with open(path, "wb") as out:
        while out.tell() < target:
            size = rng.randrange(100_000, 600_000) if attachments and n % 10 else 0
            out.write(_message(rng, n, size) + b"\n")
            n += 1
    return n


def read_whole(path: Path) -> float:
    """Peak RSS MB of a fresh process that reads ``path`` whole."""
    out = subprocess.run([sys.executable, "-c", READ_WHOLE.format(path=str(path))], check=True,
                         capture_output=True, text=True)
    return float(out.stdout.split()[-1])


def run_child(data: Path, corpus: Path) -> list[float]:
    """The autoindex of ``corpus`` in a fresh process (bench_autoindex's RSS child): CPU s, workers' CPU s, their
    peak RSS, wall s, its peak RSS MB, its and its workers' RSS added up at their peak, documents, edges."""
    out = subprocess.run([sys.executable, "-c", RSS_CHILD.format(data=str(data), corpus=str(corpus))], check=True,
                         capture_output=True, text=True)
    return [float(x) for x in out.stdout.split()[-8:]]


def bench(tmp: Path, name: str, mib: int, attachments: bool) -> None:
    corpus = tmp / name
    corpus.mkdir()
    box = corpus / "All mail Including Spam and Trash.mbox"
    messages = generate(box, mib, attachments)
    size = box.stat().st_size / (1 << 20)
    baseline = read_whole(box)
    cpu, _helper_cpu, _helper_rss, wall, peak, summed, documents, edges = run_child(tmp / f"data-{name}", corpus)
    print(f"{name}: {size:,.0f} MiB, {messages:,} messages -> {documents:,.0f} documents, {edges:,.0f} edges in "
          f"{wall:.1f}s ({size / wall:.1f} MiB/s, CPU {cpu:.1f}s); peak RSS {peak:,.0f} MB (with workers "
          f"{summed:,.0f} MB), a process reading the file whole {baseline:,.0f} MB: ratio "
          f"{max(peak, summed) / baseline:.2f} ({max(peak, summed) / size:.2f} MB per MiB of mailbox)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=512, help="size of the generated mail export")
    parser.add_argument("--text-mib", type=int, default=48, help="size of the generated text-only archive")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start", flush=True)
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        bench(tmp, "export", args.mib, attachments=True)
        bench(tmp, "archive", args.text_mib, attachments=False)
    print(f"load average {os.getloadavg()[0]:.1f} at the end", flush=True)


if __name__ == "__main__":
    main()
