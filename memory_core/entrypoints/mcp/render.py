"""The short text content of each MCP tool's answer, for the model."""

from __future__ import annotations

from memory_core.domain.event_dates import PLAN_CATEGORY, event_span_text
from memory_core.entrypoints.mcp.models import (
    DATA_NOTE,
    EntitiesOutput,
    EntityItem,
    ForgetEntityOutput,
    ForgetOutput,
    ListOutput,
    MemoryItem,
    RememberOutput,
    SearchOutput,
)
from memory_core.language.sanitize import quote_memory

__all__ = ["entities_text", "forget_entity_text", "forget_text", "list_text", "remember_text", "search_text"]


def _item_line(number: int, item: MemoryItem) -> str:
    passed = item.category == PLAN_CATEGORY and item.tense == "past"  # history, not something to come
    category = "past" if passed else item.category
    labels = [category] if item.kind == item.category else [category, item.kind]
    dates = event_span_text(item.event_at, item.event_until)
    if dates is not None:
        labels.append(f"was planned for {dates}" if passed else dates)
    if item.status != "active":
        labels.append(item.status)
    if item.valid_until is not None:
        labels.append(f"held until {item.valid_until.date().isoformat()}, no longer current")
    return (
        f"{number}. [{'; '.join(labels)}; importance={item.importance:.2f}] "
        f"{quote_memory(item.memory, sanitized=True)} (id {item.id})"
    )


def search_text(output: SearchOutput) -> str:
    """``search_memories``' text content."""
    if not output.memories:
        lines = ["No memories found for this query."]
    else:
        lines = [f"{len(output.memories)} memories found ({DATA_NOTE}):"]
        lines += [_item_line(n, item) for n, item in enumerate(output.memories, start=1)]
    return "\n".join(lines + [f"note: {note}" for note in output.notes])


def remember_text(output: RememberOutput) -> str:
    """``remember``'s text content."""
    if output.status == "duplicate":
        return "Already remembered; nothing changed."
    if not output.decisions:
        return (
            "Nothing durable to remember was found. State it as the user would, for example "
            "'I am vegetarian' or 'I prefer window seats'."
        )
    lines = [f"Remembered ({len(output.decisions)} decision(s)):"]
    for d in output.decisions:
        labels = d.category if d.kind == d.category else f"{d.category}; {d.kind}"
        line = f"- {d.event} [{labels}] {quote_memory(d.memory, sanitized=True)}"
        if d.previous is not None:
            label = "already known as" if d.event == "NONE" else "was"
            line += f" ({label} {quote_memory(d.previous, sanitized=True)})"
        lines.append(line + (f" (id {d.memory_id})" if d.memory_id else ""))
    return "\n".join(lines)


def forget_text(output: ForgetOutput) -> str:
    """``forget``'s text content."""
    if output.already_forgotten:
        return f"Memory {output.memory_id} had already been forgotten."
    return f"Forgot memory {output.memory_id}: {quote_memory(output.memory, sanitized=True)}"


def list_text(output: ListOutput) -> str:
    """``list_memories``' text content."""
    if not output.memories:
        return "No memories."
    lines = [f"{len(output.memories)} memories ({DATA_NOTE}):"]
    lines += [_item_line(n, item) for n, item in enumerate(output.memories, start=1)]
    if output.next_cursor:
        lines.append(f"More: call list_memories with cursor {output.next_cursor!r}.")
    return "\n".join(lines)


def _entity_label(item: EntityItem) -> str:
    """``Ana (person, sister; also Annie)``, the name quoted as data."""
    named = quote_memory(item.name, sanitized=True) if item.name else f"the user's {item.relation or item.kind}"
    labels = [item.kind] + ([item.relation] if item.relation and item.name else [])
    aliases = f"; also {', '.join(quote_memory(a, sanitized=True) for a in item.aliases)}" if item.aliases else ""
    return f"{named} ({', '.join(labels)}{aliases})"


def entities_text(output: EntitiesOutput) -> str:
    """``list_entities``' text content."""
    if not output.entities:
        return "No people, pets, places or organisations are named in the memories."
    lines = [f"{len(output.entities)} entities named in the memories ({DATA_NOTE}):"]
    lines += [
        f"{n}. {_entity_label(item)}: {item.memory_count} memories (id {item.id})"
        for n, item in enumerate(output.entities, start=1)
    ]
    return "\n".join(lines)


def forget_entity_text(output: ForgetEntityOutput) -> str:
    """``forget_entity``'s text content."""
    lines = [f"Forgot {_entity_label(output.entity)} and the {len(output.forgotten)} memories naming it."]
    if not output.entity_removed:
        lines.append("A memory naming it was written meanwhile; list_entities shows it still.")
    return "\n".join(lines)
