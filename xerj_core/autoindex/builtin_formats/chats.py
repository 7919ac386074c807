"""AI chat exports: ChatGPT's and Claude's ``conversations.json``, a document per conversation.

Both services export a person's chats as a JSON list named ``conversations.json``:

- ChatGPT (Settings, Data controls, Export): each conversation has ``title``,
  ``create_time``/``update_time`` (epoch seconds), ``id`` (or
  ``conversation_id``) and ``mapping``, a tree of message nodes (an edited
  question or a regenerated answer starts a branch); ``current_node`` is the
  leaf the person last saw, and the path from the root to it is the
  conversation as it reads. A message has ``author.role``, ``content``
  (``content_type`` ``text`` or ``multimodal_text`` with ``parts``, ``code``
  with ``text``) and ``metadata`` (``model_slug``, ``is_visually_hidden_from_conversation``).
- Claude (Settings, Privacy, Export data): each conversation has ``uuid``,
  ``name``, ``created_at``/``updated_at`` (ISO 8601) and ``chat_messages`` in
  order, each with ``sender`` (``human`` or ``assistant``), ``text`` or
  ``content`` blocks (``{"type": "text", "text": ...}``), and ``attachments``
  whose ``extracted_content`` is the text of a file the person gave.

The file's card (kind ``file``) counts ``conversations`` and names the
``service``; each conversation is a document (kind ``conversation``,
``{path}#{conversation id}``, ordinal from 1 in the export's order) titled by
its title (its first question when it has none), its text the turns in order,
each opened by ``You:`` or ``ChatGPT:``/``Claude:`` on a line of its own.
Fields: ``conversation_id``, ``created_ms``/``updated_ms``, ``messages``
(the turns kept), ``model`` (the model that wrote most answers, ChatGPT) and
``url`` (where the service shows it). Kept are what the person and the model
said: hidden system messages, tool calls and their output, and a model's
reasoning summaries are left out; an image the person sent stands as
``[image]``, a file's extracted text follows the question it came with.

Claude's export also holds ``projects.json``: each project (``uuid``,
``name``, ``description``, ``prompt_template``: the instructions given it) is
a document of kind ``project`` (``{path}#{project id}``), followed by a
document of kind ``knowledge`` for each document given it (``docs``:
``filename``, ``content``), ``{path}#{project id}/{document id}``, whose
``project`` field names its project's document.

A ``conversations.json`` or ``projects.json`` that is neither export (another
program's file of that name) is passed by as ``no_format``, and one that is not
JSON is refused.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any, Iterator

from xerj_core import hookimpl
from xerj_core.autoindex.builtin_formats._common import document, load_json
from xerj_core.autoindex.formats import NO_FORMAT, FormatDeclined, file_name
from xerj_core.model import SourceDocument

EXPORT_NAME = "conversations.json"
# Claude's export also holds the person's projects: their instructions and the documents given them as knowledge.
PROJECTS_NAME = "projects.json"
_CHATGPT_URL = "https://chatgpt.com/c/"
_CLAUDE_URL = "https://claude.ai/chat/"
_CLAUDE_PROJECT_URL = "https://claude.ai/project/"
# A conversation's title when it has none and no question either.
UNTITLED = "(untitled conversation)"
UNTITLED_PROJECT = "(untitled project)"
_TITLE_CHARS = 120


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _list(value: Any) -> list[Any]:
    """``value`` when it is a list, else none: an export's field read as a list whatever it holds."""
    return value if isinstance(value, list) else []


def _epoch_ms(value: Any) -> int | None:
    """Epoch milliseconds of ChatGPT's epoch seconds (a float) or Claude's ISO 8601 instant, from 1970 to the
    year 9999; None otherwise."""
    if isinstance(value, str) and value:
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except (ValueError, OverflowError, OSError):
            return None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < _YEAR_10000:
        return int(value * 1000)
    return None


_YEAR_10000 = 253_402_300_800  # epoch seconds


def _chatgpt_path(mapping: dict[str, Any], leaf: Any) -> list[dict[str, Any]]:
    """The messages from the root to ``leaf`` (the branch the person last saw); with no such leaf, every message
    in order of writing (a branch's alternatives included, as nothing says which one stands)."""
    if isinstance(leaf, str) and leaf in mapping:
        path, seen = [], set()
        while isinstance(leaf, str) and leaf in mapping and leaf not in seen:
            seen.add(leaf)
            node = mapping[leaf] if isinstance(mapping[leaf], dict) else {}
            if isinstance(node.get("message"), dict):
                path.append(node["message"])
            leaf = node.get("parent")
        return path[::-1]
    messages = [node["message"] for node in mapping.values()
                if isinstance(node, dict) and isinstance(node.get("message"), dict)]
    return sorted(messages, key=lambda m: m.get("create_time") if isinstance(m.get("create_time"), (int, float))
                  else 0)


def _chatgpt_content(content: Any) -> str:
    """What a ChatGPT message says: its text parts (an image as ``[image]``), or its code fenced."""
    if not isinstance(content, dict):
        return ""
    kind = content.get("content_type")
    if kind in ("text", "multimodal_text"):
        parts = []
        for part in _list(content.get("parts")):
            if isinstance(part, str):
                parts.append(part.strip())
            elif isinstance(part, dict) and "image" in str(part.get("content_type", "")):
                parts.append("[image]")
        return "\n\n".join(part for part in parts if part)
    if kind == "code" and _text(content.get("text")):
        return f"```\n{content['text'].strip()}\n```"
    return ""


def _chatgpt_turns(conversation: dict[str, Any]) -> tuple[list[tuple[str, str]], Counter[str]]:
    mapping = conversation.get("mapping")
    turns: list[tuple[str, str]] = []
    models: Counter[str] = Counter()
    for message in _chatgpt_path(mapping if isinstance(mapping, dict) else {}, conversation.get("current_node")):
        author = message.get("author") if isinstance(message.get("author"), dict) else {}
        metadata = message.get("metadata") if isinstance(message.get("metadata"), dict) else {}
        role = author.get("role")
        if role not in ("user", "assistant") or metadata.get("is_visually_hidden_from_conversation"):
            continue
        if role == "assistant" and message.get("recipient") not in (None, "all"):
            continue  # a call to a tool (the browser, the code runner), not an answer
        said = _chatgpt_content(message.get("content"))
        if not said:
            continue
        if role == "assistant" and isinstance(metadata.get("model_slug"), str):
            models[metadata["model_slug"]] += 1
        turns.append(("You" if role == "user" else "ChatGPT", said))
    return turns, models


def _claude_turns(conversation: dict[str, Any]) -> list[tuple[str, str]]:
    turns = []
    for message in _list(conversation.get("chat_messages")):
        if not isinstance(message, dict) or message.get("sender") not in ("human", "assistant"):
            continue
        blocks = [_text(block.get("text")) for block in _list(message.get("content"))
                  if isinstance(block, dict) and block.get("type") == "text"]
        said = "\n\n".join(block for block in blocks if block) or _text(message.get("text"))
        for attachment in _list(message.get("attachments")):
            if isinstance(attachment, dict) and _text(attachment.get("extracted_content")):
                name = _text(attachment.get("file_name")) or "attachment"
                said += f"\n\n[{name}]\n{attachment['extracted_content'].strip()}"
        if said.strip():
            turns.append(("You" if message["sender"] == "human" else "Claude", said.strip()))
    return turns


def _service(conversations: list[Any]) -> str | None:
    """``chatgpt`` or ``claude`` when every conversation has that export's shape; None otherwise."""
    if all(isinstance(c, dict) and isinstance(c.get("mapping"), dict) for c in conversations):
        return "chatgpt"
    if all(isinstance(c, dict) and isinstance(c.get("chat_messages"), list) for c in conversations):
        return "claude"
    return None


class ChatExportFormat:
    """ChatGPT's and Claude's conversation exports into ``ax-chats``."""

    name = "chats"
    dataset = "ax-chats"
    priority = 10
    version = 1

    def accepts(self, rel_path: str, head: bytes) -> bool:
        return file_name(rel_path) in (EXPORT_NAME, PROJECTS_NAME) and \
            head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"["

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        conversations = load_json(data, rel_path, [])
        if file_name(rel_path) == PROJECTS_NAME:
            return self._projects(rel_path, mtime_ms, conversations)
        service = _service(conversations) if isinstance(conversations, list) and conversations else None
        if service is None:
            raise FormatDeclined("a conversations.json that is neither ChatGPT's nor Claude's export",
                                 kind=NO_FORMAT)
        docs = list(self._conversations(rel_path, mtime_ms, service, conversations))
        card = document(self, rel_path, mtime_ms, doc_id=rel_path, title=file_name(rel_path), text="", section="",
                        kind="file", ordinal=0, service=service, conversations=len(docs))
        return [card, *docs]

    def _projects(self, rel_path: str, mtime_ms: int, projects: Any) -> list[SourceDocument]:
        """Claude's ``projects.json``: a document per project (its description and instructions), then one per
        document given it as knowledge (``{path}#{project}/{document}``, kind ``knowledge``, its ``project``)."""
        if not (isinstance(projects, list) and projects and all(
                isinstance(p, dict) and isinstance(p.get("docs"), list) and "prompt_template" in p for p in projects)):
            raise FormatDeclined("a projects.json that is not Claude's export", kind=NO_FORMAT)
        docs: list[SourceDocument] = []
        seen: set[str] = set()
        for ordinal, project in enumerate(projects, start=1):
            key = _text(project.get("uuid"))
            anchor = key if key and key not in seen else f"project-{ordinal}"
            seen.add(anchor)
            name = _text(project.get("name")) or UNTITLED_PROJECT
            text = "\n\n".join(part for part in (_text(project.get("description")),
                                                  _text(project.get("prompt_template"))) if part)
            docs.append(document(self, rel_path, mtime_ms, doc_id=f"{rel_path}#{anchor}", title=name, text=text,
                                 section=name, kind="project", ordinal=len(docs) + 1, project_id=key or None,
                                 created_ms=_epoch_ms(project.get("created_at")),
                                 updated_ms=_epoch_ms(project.get("updated_at")),
                                 url=_CLAUDE_PROJECT_URL + key if key else None))
            named: set[str] = set()
            for k, given in enumerate(project["docs"], start=1):
                if not isinstance(given, dict):
                    continue
                filename = _text(given.get("filename")) or f"document-{k}"
                part = _text(given.get("uuid")) or filename
                part = part if part not in named else f"document-{k}"
                named.add(part)
                docs.append(document(self, rel_path, mtime_ms, doc_id=f"{rel_path}#{anchor}/{part}", title=filename,
                                     text=_text(given.get("content")), section=filename, kind="knowledge",
                                     ordinal=len(docs) + 1, project=f"{rel_path}#{anchor}",
                                     created_ms=_epoch_ms(given.get("created_at"))))
        card = document(self, rel_path, mtime_ms, doc_id=rel_path, title=file_name(rel_path), text="", section="",
                        kind="file", ordinal=0, service="claude", projects=len(projects))
        return [card, *docs]

    def _conversations(self, rel_path: str, mtime_ms: int, service: str, conversations: list[dict[str, Any]]
                       ) -> Iterator[SourceDocument]:
        seen: set[str] = set()
        for ordinal, conversation in enumerate(conversations, start=1):
            if service == "chatgpt":
                turns, models = _chatgpt_turns(conversation)
                key = _text(conversation.get("conversation_id")) or _text(conversation.get("id"))
                title = _text(conversation.get("title"))
                created, updated = conversation.get("create_time"), conversation.get("update_time")
                url, model = _CHATGPT_URL, models.most_common(1)[0][0] if models else None
            else:
                turns = _claude_turns(conversation)
                key, title = _text(conversation.get("uuid")), _text(conversation.get("name"))
                created, updated = conversation.get("created_at"), conversation.get("updated_at")
                url, model = _CLAUDE_URL, None
            # a conversation without an id (or with one seen before) is named by its place in the export
            anchor = key if key and key not in seen else f"conversation-{ordinal}"
            seen.add(anchor)
            if not title:
                first = next((said for who, said in turns if who == "You"), "")
                title = " ".join(first.split())[:_TITLE_CHARS] or UNTITLED
            yield document(self, rel_path, mtime_ms, doc_id=f"{rel_path}#{anchor}", title=title,
                           text="\n\n".join(f"{who}:\n{said}" for who, said in turns), section=title,
                           kind="conversation", ordinal=ordinal, conversation_id=key or None,
                           created_ms=_epoch_ms(created), updated_ms=_epoch_ms(updated), messages=len(turns),
                           model=model, url=url + key if key else None)


@hookimpl
def xerj_register_formats(register) -> None:
    register(ChatExportFormat())
