"""The relation vocabulary: what a statement says about the user, and whether that holds one value at a
time (where they live: a new value replaces the old) or accumulates (what they like: another value is
added). One table, Japanese and English, read by the consolidation rules and shown to the LLM."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "CHOICE",
    "RELATIONS",
    "Relation",
    "asked_relations",
    "one_value_relations",
    "relation_summary",
    "tells",
]


@dataclass(frozen=True, slots=True)
class Relation:
    """One relation between the user and a value.

    Attributes:
        name: Its name (a slot, for one-value relations).
        one_value: A new value replaces the old one (otherwise values accumulate).
        pattern: How a statement says it.
        examples: How people say it, for the LLM's instructions.
        asked: How a question asks for it ("Where does the user live?", 「ユーザーの仕事は？」), for search:
            a memory that tells the relation a question asks for answers it, whatever its words.
        told: What else tells it in a memory, for search only ("I'm a chef at a bistro" tells the job,
            "We moved to Bristol" the home; ``pattern`` stays narrow, since it decides what replaces).
    """

    name: str
    one_value: bool
    pattern: re.Pattern[str]
    examples: str
    asked: re.Pattern[str] | None = None
    told: re.Pattern[str] | None = None


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


#: Every relation, one-value relations first. A one-value relation is a slot: a new value in the same
#: slot replaces the old one ("I live in Berlin" → "I moved to Munich"), a value in another slot does
#: not ("my favorite fantasy novels" and "my favorite fantasy shows" are two slots; "I lost my job"
#: names no job). Accumulating relations never replace: "I like cats" and "I like dogs" are two facts;
#: only a negation or an explicit change ("no longer", 「もう〜ない」) replaces what it names.
RELATIONS: tuple[Relation, ...] = (
    Relation(
        "home",
        True,
        _rx(
            r"(?<!一緒に)住んで(?!いました|いた)|(?<!一緒に)住み|住まい|引越(?:ました|た|す|します|して|する|予定|先)|"
            r"\blive in\b|\blives in\b|\bliving in\b"
        ),
        "where they live (live in, moved to; 住んでいる, 引っ越した)",
        _rx(
            r"\bwhere (?:does|do|did|is) .{0,40}\b(?:live|living|based|stay|staying)\b|\bwhich (?:city|town|country)\b|"
            r"\bhome ?town\b|どこに住|どこ在住|住んで|住まい|住所"
        ),
        _rx(r"\b(?:moved|moving|relocated|relocating) to\b|\bour (?:new )?(?:flat|house|apartment|home)\b|在住|に越して"),
    ),
    Relation(
        "household",
        True,
        _rx(r"人暮らし|実家暮らし|同居|一緒に住|\blive (?:alone|with)\b|\bliving (?:alone|with)\b|\broommates?\b"),
        "who they live with (live alone, with roommates; 一人暮らし, 実家暮らし)",
        _rx(r"\blives? with\b|\bliving with\b|\blive alone\b|誰と(?:住|暮ら)|一緒に住|同居|一人暮らし"),
    ),
    Relation(
        "name",
        True,
        _rx(
            r"名前|と申します|と呼んで|って呼んで|(?:と|って)呼ばれて|"
            r"\bmy name\b|\bname is\b|\bcalls? me\b|\bi go by\b"
        ),
        "the name they go by (my name is, call me; 名前は, と呼んでください)",
        _rx(r"\bname\b|\bnickname\b|\bwhat (?:should|do|does) .{0,30}\bcall\b|名前|呼び方|(?:何|なん)て呼|(?:何|なん)と呼"),
    ),
    Relation(
        "job",
        True,
        _rx(
            r"職業|仕事は|勤め|勤務|働いて(?!いました|いた)|転職|就職|入社|として働|"
            r"(?:師|者|員|士|家|手|ナー|ニア|ター|ャー|ント|スト)(?:を|として)?(?:して|やって)(?:います|いる|ます|る)|"
            r"(?:会社|企業|事務所)で.{0,12}(?:して|やって)(?:います|いる|ます|る)|"
            r"\bwork (?:at|for|as)\b|"
            r"\bmy (?:job|occupation|profession) is\b|\bworking (?:as|at|for)\b|"
            r"\bi (?:\w+ )?(?:started|got|landed|took|accepted) (?:a |my |the )?new job\b|\bmy new job\b"
        ),
        "their job and employer (work at, work as; 勤めている, 転職した)",
        _rx(
            r"\b(?:job|jobs|work|works|occupation|profession|career|employer|employed|living)\b|"
            r"仕事|職業|勤め|勤務|働い|職場|勤務先"
        ),
        _rx(
            r"\bi(?:'m| am| was) an? (?:[\w-]+ ){0,2}[\w-]*(?:er|or|ist|ian|ant|ent|chef|cook|nurse|doctor|clerk|"
            r"pilot|coach|barista|admin|analyst|engineer)\b|\bi(?:'m| am| was) an? [\w -]{1,40}? (?:at|for) (?:a|an|the|my|(?-i:[A-Z]))|"
            r"\bpromoted to\b|\b(?:work|worked|working) (?:at|as|for|in)\b|\bmy (?:boss|manager|colleagues?|employer)\b|"
            r"(?:師|者|員|士|家|医|官|職人|料理人|社長|ナー|ダー|ニア|ター|ャー|ント|スト|マン)(?:です|だ|でした|をして|として|になり|になっ|に昇進)|"
            r"昇進|会社員"
        ),
    ),
    Relation(
        "origin",
        True,
        _rx(r"出身|\bi'?m from\b|\bi am from\b|\bborn in\b"),
        "where they are from",
        _rx(r"\bwhere .{0,40}\bfrom\b|\bhome ?town\b|\bgrow up\b|出身"),
        _rx(r"\bgrew up in\b|育ち"),
    ),
    Relation("birthday", True, _rx(r"誕生日|\bbirthday\b"), "their birthday", _rx(r"\bbirthday\b|\bborn\b|誕生日|生まれ")),
    Relation(
        "age",
        True,
        _rx(r"[0-9]+\s*(?:歳|才)|\byears old\b|\bmy age\b"),
        "their age",
        _rx(r"\bhow old\b|\bage\b|何歳|年齢|(?:お)?いくつ"),
    ),
    Relation(
        "diet",
        True,
        _rx(
            r"ベジタリアン|ヴィーガン|ビーガン|菜食|ペスカタリアン|(?:肉|魚)(?:も|を|は)?食べ(?:る|ます|ています|てる)|"
            r"\b(?:vegetarian|vegan|pescatarian|pescetarian|omnivore|carnivore)\b|"
            r"\bi (?:now |only )?eat (?:meat|fish|seafood|everything)\b|\bi'?m (?:on )?(?:a )?(?:keto|paleo) diet\b"
        ),
        "their diet (vegetarian, vegan, eats fish now; ベジタリアン, 魚は食べる)",
        _rx(r"\bdiet\b|\beats? (?:meat|fish)\b|\bvegetarian\b|\bvegan\b|食生活|食事制限|(?:肉|魚)(?:は|を)?食べ|ベジタリアン"),
    ),
    Relation(
        "relationship",
        True,
        _rx(
            r"独身|既婚|結婚(?:して|した|しました)|離婚|婚約|付き合って|"
            r"\bi'?m (?:single|married|divorced|engaged|widowed|separated)\b|\bi am (?:single|married|divorced|engaged)\b|"
            r"\bi (?:just )?got (?:married|divorced|engaged)\b|\b(?:in a relationship|dating someone)\b"
        ),
        "their relationship status (single, married, engaged; 独身, 結婚した)",
        _rx(r"\brelationship\b|\bmarried\b|\bsingle\b|\bengaged\b|\bdating\b|結婚|独身|恋人|婚約|付き合"),
        _rx(r"\b(?:wife|husband|fiancée?|girlfriend|boyfriend|partner)\b|妻|夫|彼氏|彼女|婚約者"),
    ),
    Relation(
        "phone",
        True,
        _rx(
            r"電話番号|携帯(?:番号)?は|番号(?:が|は)?変わ|\bmy (?:phone|mobile|cell)(?: number)? is\b|"
            r"\bnew (?:phone |mobile |cell )?number\b|(?<![\d-])(?:\+?\d{1,3}[ -])?\d{2,4}-\d{3,4}-\d{3,4}(?![\d-])|"
            r"(?<![\d-])\d{3}-\d{4}(?![\d-])"
        ),
        "their phone number (any phone number they give)",
        _rx(r"\bphone\b|\bmobile\b|\bcell\b|電話|携帯"),
    ),
    Relation(
        "email",
        True,
        _rx(r"メール(?:アドレス)?(?:は|を|が)|\bmy e-?mail(?: address)? is\b|[\w.+-]+@[\w-]+(?:\.[\w-]+)+"),
        "their e-mail address (any address they give)",
        _rx(r"\be-?mail\b|メール"),
    ),
    Relation(
        "reading",
        True,
        _rx(
            r"(?:を)?読んで(?:いる|います|る|ます)(?:ところ)?(?:です)?[。．.!！]*$|"
            r"\bi'?m (?:currently |now )?reading\b|\bi am reading\b|\b(?:started|began|starting) reading\b"
        ),
        "the book they are reading now",
        _rx(r"\breading\b|\bbooks?\b|読んで|読書|(?:何の|どんな)本"),
        _rx(r"\breading\b|読んで|読み始め"),
    ),
    Relation(
        "project",
        True,
        _rx(
            r"プロジェクト(?:は|を担当)|担当(?:が変わ|になっ|しています|してる)|(?:チーム|部署)に(?:います|いる|入っ|異動)|"
            r"\bmy (?:current )?project is\b|\bi'?m (?:currently )?working on (?:a |my |the )?\w+|"
            r"\bi'?m (?:on|leading|running|heading) (?:the |a )?[\w -]{0,40}?\b(?:project|redesign|migration|launch|rollout)\b"
        ),
        "the project they are working on now",
        _rx(r"\bprojects?\b|\bworking on\b|プロジェクト|担当"),
    ),
    Relation(
        "deadline",
        True,
        _rx(r"締め切り|締切|〆切|期限は|\bdeadline\b|\bdue (?:on|by)\b"),
        "a deadline",
        _rx(r"\bdeadline\b|\bdue\b|締め切り|締切|〆切|期限"),
        _rx(r"\bdue\b|期限"),
    ),
    Relation(
        "likes",
        False,
        _rx(r"好き|気に入って|お気に入り|愛用|\b(?:like|likes|love|loves|enjoy|enjoys|adore|fond of|fan of|into)\b"),
        "likes (I like cats, I love sushi; 猫が好き)",
    ),
    Relation(
        "dislikes",
        False,
        _rx(r"嫌い|苦手|\b(?:hate|hates|dislike|dislikes|can't stand|not a fan of)\b"),
        "dislikes (I hate olives; ピーマンが苦手)",
    ),
    Relation("hobby", False, _rx(r"趣味|\bmy hobby\b|\bhobbies\b|\bin my free time\b"), "hobbies"),
    Relation(
        "pet",
        False,
        _rx(r"飼って|ペット|\bmy (?:dog|cat|puppy|kitten|rabbit|hamster|parrot|pet)\b|\bi have (?:a|an|two|three|\d+) (?:dog|cat|pet)s?\b"),
        "pets (a dog named Rex; 猫を飼っている)",
    ),
    Relation(
        "family",
        False,
        _rx(
            r"(?:姉|兄|妹|弟|息子|娘|子ども|子供)が(?:い|二人|2人|一人|1人)|"
            r"\bi have (?:a|an|two|three|\d+) (?:sister|brother|son|daughter|kid|child|children|twin)s?\b"
        ),
        "family members (I have a sister; 妹がいる)",
    ),
    Relation("allergy", False, _rx(r"アレルギー|\ballerg(?:y|ic)\b"), "allergies"),
    Relation("language", False, _rx(r"(?:語|ご)を?(?:話|喋|しゃべ)|\bi speak\b|\bfluent in\b"), "languages they speak"),
    Relation(
        "visited",
        False,
        _rx(r"(?:に|へ)行った(?:こと)?|訪れ|\bi(?:'ve| have)? (?:visited|been to)\b"),
        "places they have been",
    ),
)

#: A statement that chooses among alike things ("I prefer window seats", 「紅茶派」, 「コーヒーのほうがいい」):
#: one choice at a time in a group, so another choice of the same group replaces it.
CHOICE = re.compile(
    r"派(?:です|だ|なんです)?|(?:の方|のほう)?が(?:いい|良い)(?:です|な|なあ|んです)?$|(?:の方|のほう)が好き|"
    r"最優先|優先|重視|一番|いちばん|"
    r"\b(?:prefer|prefers|preferred|rather|would choose|go-to|always (?:pick|choose|get|order))\b",
    re.IGNORECASE,
)


def one_value_relations(text: str) -> set[str]:
    """The one-value relations (slots) ``text`` fills."""
    return {r.name for r in RELATIONS if r.one_value and r.pattern.search(text)}


def asked_relations(question: str) -> tuple[Relation, ...]:
    """The relations ``question`` asks for (a search query: "What does the user do for work?": the job)."""
    return tuple(r for r in RELATIONS if r.asked is not None and r.asked.search(question))


def tells(relation: Relation, text: str) -> bool:
    """Whether a memory's ``text`` tells ``relation`` (its statement pattern, or what else tells it)."""
    return bool(relation.pattern.search(text) or (relation.told is not None and relation.told.search(text)))


def relation_summary() -> str:
    """The vocabulary as two lines of instructions (the LLM's prompt says what the rules do)."""
    one = "; ".join(r.examples for r in RELATIONS if r.one_value)
    many = "; ".join(r.examples for r in RELATIONS if not r.one_value)
    return (
        f"Attributes that hold ONE value at a time (a new value supersedes the old: UPDATE): {one}; "
        "'my favourite X'; a preference between alike choices (prefer the window seat, 紅茶派).\n"
        f"Attributes that ACCUMULATE (another value is a new memory: ADD, never UPDATE or DELETE): {many}. "
        "Only a negation or an explicit change (no longer, anymore, instead, now; もう〜ない, やめた, 今は) "
        "replaces, and only the value it names."
    )
