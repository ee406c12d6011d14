"""``memory-core entities``: the people, pets, places and organisations a user's memories name; one
of them with its memories (``show``); forgetting one with every memory that names it (``forget``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TextIO

from memory_core.cli.arguments import add_scope
from memory_core.cli.context import service_for
from memory_core.cli.memories import write_records
from memory_core.cli.output import EXIT_OK, print_json
from memory_core.contract.entity_views import entity_detail, entity_forget_response, entity_list_response
from memory_core.domain.entities import Entity
from memory_core.domain.records import Scope
from memory_core.errors import ValidationError

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.cli.arguments import Commands

__all__ = ["EXAMPLES", "add_arguments", "cmd_entities", "describe"]

#: The examples ``--help`` shows, by the command's words after ``memory-core``.
EXAMPLES = {
    "entities": "memory-core --db my.db entities --user u1   # then: entities show ent_3f2a --user u1",
}

#: What ``memory-core entities`` does with its ``ID``.
ACTIONS = ("list", "show", "forget")


def add_arguments(commands: Commands) -> None:
    """Add ``entities``."""
    p = commands.add_parser(
        "entities",
        help="who and what a user's memories name (people, pets, places, organisations); show one with its "
        "memories, or forget one with every memory that names it",
    )
    p.add_argument(
        "action", nargs="?", choices=ACTIONS, default="list",
        help="list the entities; show ID: one with its memories; forget ID: soft-delete every memory that "
        "names it, and the entity with them (default: list)",
    )
    p.add_argument("id", nargs="?", metavar="ID", help="the entity's id, or any start of it unique for the user and agent")
    add_scope(p)
    p.set_defaults(handler=cmd_entities)


def describe(entity: Entity) -> str:
    """One entity in a few words: its name, relation and aliases."""
    words = [entity.name or f"({entity.relation})"]
    if entity.name and entity.relation:
        words.append(f"({entity.relation})")
    if entity.aliases:
        words.append(f"aka {', '.join(entity.aliases)}")
    return " ".join(words)


async def cmd_entities(args: argparse.Namespace, out: TextIO) -> int:
    """List the scope's entities, show one, or forget one (``--json``: the API's answer).

    Raises:
        ValidationError: ``show`` or ``forget`` without an id, or ``list`` with one (names ``id``).
    """
    if (args.action == "list") != (args.id is None):
        raise ValidationError("id", f"{args.action} {'takes no' if args.action == 'list' else 'needs an'} entity id")
    scope = Scope.of(args.user, args.agent)
    async with service_for(args) as service:
        if args.action == "list":
            found = await service.entities(scope)
            if args.json:
                print_json(entity_list_response(scope.user_id, scope.agent_id, found).model_dump(mode="json"), out)
                return EXIT_OK
            for s in found:
                e = s.entity
                out.write(
                    f"{e.id}  {e.kind:<6} {describe(e)}  [{s.memory_count} {'memory' if s.memory_count == 1 else 'memories'}; first "
                    f"{e.first_mentioned.date().isoformat()}, last {e.last_mentioned.date().isoformat()}]\n"
                )
            if not found:
                out.write("no entities: the memories of this user and agent name nobody\n")
            return EXIT_OK
        entity_id = await service.resolve_entity_id(scope, args.id)
        if args.action == "show":
            detail = await service.entity(scope, entity_id)
            if args.json:
                print_json(entity_detail(detail).model_dump(mode="json"), out)
                return EXIT_OK
            out.write(f"{detail.entity.id}  {detail.entity.kind}  {describe(detail.entity)}\n")
            write_records(detail.memories, out)
            return EXIT_OK
        report = await service.forget_entity(scope, entity_id)
    if args.json:  # what DELETE /api/entities/{entity_id} answers
        print_json(entity_forget_response(report).model_dump(mode="json"), out)
        return EXIT_OK
    gone = "the entity is gone" if report.entity_removed else "the entity stays (a memory naming it came meanwhile)"
    out.write(f"forgot {report.entity.id} ({describe(report.entity)}): {len(report.forgotten)} memories deleted; {gone}\n")
    return EXIT_OK
