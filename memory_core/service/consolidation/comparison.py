"""Two statements compared feature by feature (pure): shared content, alike objects, conflicts."""

from __future__ import annotations

from dataclasses import dataclass

from memory_core.language.lexicon import exclusive_group, lexicon_group
from memory_core.service.consolidation.features import StatementFeatures, statement_features

__all__ = ["Comparison", "compare_statements", "compared"]


@dataclass(frozen=True, slots=True)
class Comparison:
    """How a new statement relates to an old one, feature by feature."""

    old: StatementFeatures
    new: StatementFeatures
    same_text: bool
    overlap: float
    only_old: tuple[str, ...]
    only_new: tuple[str, ...]

    @property
    def containment(self) -> float:
        """Shared content terms over the smaller side's (1.0 when one side's content holds the other's)."""
        smaller = min(len(self.old.terms), len(self.new.terms))
        return len(self.old.terms & self.new.terms) / smaller if smaller else 0.0

    @property
    def related(self) -> bool:
        """The two statements talk about the same thing (lexically)."""
        return self.same_content or self.overlap >= 0.5 or self.containment >= 0.6

    @property
    def same_content(self) -> bool:
        return self.old.terms == self.new.terms

    @property
    def new_covers_old(self) -> bool:
        return bool(self.old.terms) and self.old.terms < self.new.terms

    @property
    def old_covers_new(self) -> bool:
        return bool(self.new.terms) and self.new.terms < self.old.terms

    @property
    def replaced(self) -> list[str]:
        """The old statement's words the new one says it replaces ("ピアノはやめて", "instead of tea")."""
        return [u for u in self.old.units if u in self.new.replaced]

    @property
    def same_speaker(self) -> bool:
        """Both statements are the same person's (or do not say whose they are)."""
        return self.old.speaker is None or self.new.speaker is None or self.old.speaker == self.new.speaker

    @property
    def polarity_conflict(self) -> bool:
        return (self.old.polarity < 0) != (self.new.polarity < 0)

    @property
    def numbers_conflict(self) -> bool:
        return bool(self.old.numbers) and bool(self.new.numbers) and self.old.numbers != self.new.numbers

    @property
    def when_conflict(self) -> bool:
        return bool(self.old.when) and bool(self.new.when) and self.old.when != self.new.when

    @property
    def shares_predicate(self) -> bool:
        """The two say something of the same kind: shared content, the same liking or disliking, or the
        new one says it is a change."""
        return (
            bool(self.old.terms & self.new.terms)
            or self.old.polarity == self.new.polarity != 0
            or self.new.change
        )

    @property
    def both_say_more(self) -> bool:
        """Each side says something the other does not, with no negation between them."""
        return bool(self.only_old) and bool(self.only_new) and not self.polarity_conflict

    def surface(self, unit: str) -> str:
        """A content word as the user wrote it."""
        for features in (self.new, self.old):
            for canonical, written in zip(features.units, features.surface, strict=False):
                if canonical == unit:
                    return written
        return unit.lstrip("≡")

    def focused(self, alike: tuple[str, str]) -> bool:
        """Besides the alike pair, each side says at most one thing the other does not (two when the new
        statement says it is a change: 「最近は早起きして朝に仕事をしています」)."""
        old_other = [u for u in self.only_old if self.surface(u) != alike[0]]
        new_other = [u for u in self.only_new if self.surface(u) != alike[1]]
        room = 2 if self.new.change else 1
        return len(old_other) <= 1 and len(new_other) <= room

    @property
    def ended_object(self) -> str | None:
        """What the new statement says has ended that the old one states holds ("I quit piano" and "I play
        the piano": piano), when it is a good part of what the old one is about; else ``None``."""
        if not self.new.ended or self.old.ended or self.old.polarity < 0 or not self.old.units:
            return None
        if self.alike_objects is not None:  # "I eat beef" is not ended by "I don't eat pork anymore"
            return None
        old_units = set(self.old.units)
        shared = [u for u in self.new.units if u in old_units]
        if not shared or 4 * len(set(shared)) < len(old_units):
            return None
        return self.surface(shared[0])

    @property
    def exclusive_choice(self) -> bool:
        """The differing objects are exclusive choices of one group (window / aisle, 和室 / 洋室)."""
        return any(exclusive_group(u) for u in self.only_old) and any(exclusive_group(u) for u in self.only_new)

    @property
    def alike_objects(self) -> tuple[str, str] | None:
        """One differing object on each side, of the same lexicon group (coffee / tea). A new statement
        that itself compares two objects of the group (「そばとうどんならそば」) chooses between those two and
        replaces no third one."""
        for old_unit in self.only_old:
            group = lexicon_group(old_unit)
            if group is None:
                continue
            if len({u for u in self.new.units if lexicon_group(u) == group}) > 1:
                continue
            for new_unit in self.only_new:
                if lexicon_group(new_unit) == group:
                    return self.surface(old_unit), self.surface(new_unit)
        return None


def compared(old: StatementFeatures, new: StatementFeatures) -> Comparison:
    union = old.terms | new.terms
    old_units, new_units = set(old.units), set(new.units)
    return Comparison(
        old=old,
        new=new,
        same_text=old.text == new.text,
        overlap=len(old.terms & new.terms) / len(union) if union else 1.0,
        only_old=tuple(u for u in old.units if u not in new_units),
        only_new=tuple(u for u in new.units if u not in old_units),
    )


def compare_statements(
    old: str, new: str, *, old_speaker: str | None = None, new_speaker: str | None = None
) -> Comparison:
    """Compare an existing memory's text with a new statement (pure; the speakers, when known, are
    those the texts name: see :func:`~memory_core.service.consolidation.features.split_speaker`)."""
    return compared(statement_features(old, old_speaker), statement_features(new, new_speaker))
