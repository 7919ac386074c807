"""Recall sets other than the Foam vault, for choosing embedder constants without tuning on the benchmark itself.

* ``markdown``: sections (``#`` and ``##`` headings) of the Markdown
  READMEs in the installed packages' metadata, of the Markdown files
  installed beside them, and of xerj's own README and docs/; each section
  is queried by its heading and by its first sentence, the section (heading
  line included, as a note holds its title) being the one relevant answer.
* ``docstrings``: public functions' and classes' docstrings of at least 40
  words from the installed packages; queried by the name split into words
  ("load_notes" -> "load notes") and by the first sentence.
* ``PARAPHRASES``: 30 pairs written for this purpose that say one thing in
  words the other does not use; each first half is queried against all the
  second halves. This is what hashed terms cannot do and a model can.

Pools of 90 consecutive entries (the vault has 86 notes), so each query
competes with its neighbours from the same package, as a vault's notes share
a subject. The sets are read from whatever the running interpreter has
installed, so figures move a little from one environment to another.
"""

from __future__ import annotations

import ast
import email
import re
import sys
import sysconfig
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_embedders import _FENCE, _SENTENCE_END, _plain, mrr_at  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
POOL = 90

PARAPHRASES = (
    ("automobile engine failed to turn over, dead accumulator",
     "The car would not start in the morning; the battery was flat."),
    ("physician prescribed medication for elevated blood pressure",
     "The doctor gave me pills because my hypertension was high."),
    ("purchase a residence near the coast", "We want to buy a house by the sea."),
    ("canine barked all night long", "The dog kept howling until dawn."),
    ("feline sleeping on the sofa", "A cat was napping on the couch."),
    ("monthly earnings grew sharply", "Revenue per month increased a lot."),
    ("children playing football outside", "Kids were kicking a soccer ball in the yard."),
    ("heavy rainfall flooded the streets", "The roads were under water after the storm."),
    ("laptop screen cracked after a drop", "I dropped my notebook computer and the display broke."),
    ("learning to cook pasta at home", "Making spaghetti in my own kitchen for the first time."),
    ("aircraft delayed because of fog", "The plane could not take off due to poor visibility."),
    ("student failed the mathematics exam", "The pupil did not pass the maths test."),
    ("ancient ruins discovered in the desert", "Archaeologists found old remains in the sand dunes."),
    ("cold beverage on a hot afternoon", "An iced drink when the sun is blazing."),
    ("bicycle tire went flat on the commute", "My bike had a puncture on the way to work."),
    ("server crashed under heavy traffic", "The website went down when too many users arrived."),
    ("moving to a new apartment next month", "We relocate to another flat in a few weeks."),
    ("singer performed at the concert hall", "The vocalist gave a show in the auditorium."),
    ("woman jogging in the park at dawn", "A lady runs through the gardens early in the morning."),
    ("grandmother baked an apple pie", "Granny made a fruit tart in the oven."),
    ("stock market dropped after the announcement", "Share prices fell once the news came out."),
    ("teacher graded essays late into the evening", "The instructor marked papers until night."),
    ("the meeting was postponed until Friday", "We moved the appointment to the end of the week."),
    ("wildfire destroyed hundreds of homes", "The blaze burned down many houses."),
    ("password reset email never arrived", "I did not receive the message to change my login secret."),
    ("puppy chewed my shoes", "The young dog bit and ruined my sneakers."),
    ("quit smoking to improve health", "Stopped cigarettes so I would feel better."),
    ("train arrived ahead of schedule", "The railway service came earlier than planned."),
    ("fixing a leaking faucet in the bathroom", "Repairing the dripping tap near the shower."),
    ("sad about losing the championship final", "Upset that our team was beaten in the title match."),
)

_HEADING = re.compile(r"^(#{1,2}) +(.*)")


def _first_sentence(lines: list[str]) -> str | None:
    for line in lines:
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "|", "-", "*", "<", "!", ">")) and len(_plain(stripped)) < 30:
            continue
        words = _plain(stripped)
        if len(words.split()) >= 4:
            return _SENTENCE_END.split(words, maxsplit=1)[0]
    return None


def markdown_sections(markdown: str) -> list[tuple[str, str, str]]:
    """``(heading, first sentence, heading + body)`` of each ``#``/``##`` section with a sentence and 30 words."""
    found, title, lines = [], None, []

    def close() -> None:
        sentence = _first_sentence(lines) if title else None
        body = _plain("\n".join(lines))
        if title and sentence and len(body.split()) >= 30:
            found.append((title, sentence, f"{title}\n{body}"))

    for line in _FENCE.sub(" ", markdown).splitlines():
        heading = _HEADING.match(line)
        if heading:
            close()
            title, lines = _plain(heading.group(2)), []
        else:
            lines.append(line)
    close()
    return found


def _site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def markdown_notes() -> list[tuple[str, str, str]]:
    notes: list[tuple[str, str, str]] = []
    site = _site_packages()
    for metadata in sorted(site.glob("*.dist-info/METADATA")):
        message = email.message_from_string(metadata.read_text(encoding="utf-8", errors="replace"))
        if "markdown" in (message.get("Description-Content-Type") or ""):
            notes += markdown_sections(message.get_payload())
    files = [p for p in sorted(site.rglob("*.md")) if "LICENSE" not in p.name and "AUTHORS" not in p.name]
    for path in [*files, *sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]:
        notes += markdown_sections(path.read_text(encoding="utf-8", errors="replace"))
    seen: set[str] = set()
    return [note for note in notes if not (note[0].lower() in seen or seen.add(note[0].lower()))]


def docstring_notes() -> list[tuple[str, str, str]]:
    notes, seen = [], set()
    for path in sorted(_site_packages().rglob("*.py")):
        if "/tests/" in str(path) or path.name.startswith("test_"):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            doc = ast.get_docstring(node)
            if not doc or node.name.startswith("_") or node.name in seen or len(doc.split()) < 40:
                continue
            first = _SENTENCE_END.split(" ".join(doc.split("\n\n")[0].split()), maxsplit=1)[0]
            if len(first.split()) < 4:
                continue
            seen.add(node.name)
            title = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", node.name).replace("_", " ").strip()
            notes.append((title, first, doc))
    return notes


def pools(notes: list, most: int | None = None) -> list[list]:
    """Consecutive pools of ``POOL`` entries; with ``most``, that many spread evenly over the whole set."""
    every = [notes[i: i + POOL] for i in range(0, len(notes) - POOL + 1, POOL)]
    if most and len(every) > most:
        every = every[:: len(every) // most][:most]
    return every


def devsets() -> dict[str, list[list[tuple[str, str, str]]]]:
    """Each set's pools of ``(title, first sentence, document)``; the paraphrases have no sentence query."""
    return {"markdown": pools(markdown_notes()), "docstrings": pools(docstring_notes(), most=10),
            "paraphrase": [[(query, "", answer) for query, answer in PARAPHRASES]]}


def evaluate(embed: Callable[[list[str]], np.ndarray], sets: dict) -> dict[str, float]:
    """MRR@10 per set, averaged over its pools and its query kinds (title and first sentence, or paraphrase)."""
    figures = {}
    for name, set_pools in sets.items():
        scores = []
        for pool in set_pools:
            titles, sentences, docs = (list(column) for column in zip(*pool))
            vectors = embed(docs)
            scores.append(mrr_at(vectors, embed(titles)))
            if any(sentences):
                scores.append(mrr_at(vectors, embed(sentences)))
        figures[name] = float(np.mean(scores))
    return figures
