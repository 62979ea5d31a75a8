"""Set questions: which structural relation a code question asks for, and about what.

"which types implement Binding", "classes that satisfy the Renderer interface", "subclasses
of EvalpipeError", "handlers registered in routes.go", "methods of Context that modify its
fields", "subcommands of rootCmd", "the exported methods of RouterGroup", "functions in
package render", "who uses parseAccept": each names a *relation* and an *anchor* (a symbol,
a file or a package), and its answer is a set of units read off the corpus structure, not
a passage that shares words with the question.

The grammar is small on purpose: a table of relation words with their inflections and
synonyms (`RELATION_WORDS`), kind nouns that narrow the answer (`KIND_NOUNS`), a scope
clause ("in file X", "in the Y package") and the anchor phrase, which is what remains
around the relation word once articles, kind nouns and question words are stripped. The
anchor is only a phrase here: `evalpipe.rankers.structure.graph_structure` resolves it against the
corpus (names, qualified names, paths, compound pieces) and says whether the question is
answerable; a phrase that resolves to nothing leaves the question to the base ranker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The relations a set question can ask for (answered by `graph_structure.StructureIndex`).
SET_RELATIONS = (
    "implementations",  # types/classes that implement (or satisfy) an interface
    "subclasses",  # classes that extend / derive from / inherit a class
    "registered",  # functions/methods registered (passed as values) in a file or by a unit
    "subcommands",  # commands added to a command
    "mutators",  # methods of a type that assign to the receiver's fields
    "methods",  # the methods of a type (public: exported only)
    "members",  # the units defined in a file or package
    "callers",  # units that call or use the anchor
    "callees",  # units the anchor calls
)

_I = re.IGNORECASE
#: Relation words, in priority order: the first relation whose pattern matches wins.
RELATION_WORDS: tuple[tuple[str, str], ...] = (
    (
        "subcommands",
        r"\bsub-?commands?\b|\bcommands?\s+(?:(?:are|is|get|gets|were)\s+)?(?:added|registered|attached|mounted)\s+(?:to|on|under)\b",
    ),
    (
        "implementations",
        r"\bimplement(?:s|ed|ing|ations?|ers?|ors?)?\b|\bsatisf(?:y|ies|ied|ying)\b|\bconform(?:s|ing)?\s+to\b"
        r"|\bfulfil(?:l|ls|s|ling)?\b|\brealiz(?:e|es|ing)\b",
    ),
    (
        "subclasses",
        r"\bsub-?class(?:es|ed|ing)?\b|\bextend(?:s|ed|ing)?\b|\bderiv(?:e|es|ed|ing)\b|\binherit(?:s|ed|ing|ors?)?\b"
        r"|\bchild\s+class(?:es)?\b|\bdescendants?\b|\bspecializ(?:e|es|ations?)\b",
    ),
    (
        "mutators",
        r"\bmutat(?:e|es|ed|ing|ion|ions|ors?)\b|\bmodif(?:y|ies|ied|ying|ication)\b|\bchang(?:e|es|ed|ing)\b"
        r"|\bupdat(?:e|es|ed|ing)\b|\bwrit(?:e|es|ing)\s+(?:to|into)\b|\bassign(?:s|ing)?\s+(?:to\s+)?\b"
        r"|\balter(?:s|ed|ing)?\b|\bset(?:s|ting)?\b(?!\s+of\b)|\bstor(?:e|es|ing)\s+(?:in|into)\b|\breset(?:s|ting)?\b",
    ),
    (
        "registered",
        r"\bregist(?:er|ers|ered|ering|ration|rations|ry)\b|\bmount(?:s|ed|ing)?\b|\bwired?\b|\bhooked\b"
        r"|\bhandlers\b|\bhandler\s+(?:functions?|funcs?|methods?|constructors?|factor(?:y|ies))\b|\broutes\b"
        r"|\bendpoints\b|\bpassed\s+(?:as|by)\s+(?:a\s+)?(?:values?|callbacks?|arguments?|references?)\b|\bcallbacks\b",
    ),
    (
        "methods",
        r"\bmethods?\b|\bmember\s+functions?\b|\boperations?\b|\bapi\b",
    ),
    (
        "callees",
        r"\bcallees\b|\bcalled\s+(?:by|from)\b|\bdoes\s+.+?\s+(?:call|invoke|use|depend\s+on|rely\s+on)\b",
    ),
    (
        "callers",
        r"\bcall(?:s|ers?|ing)?\b|\binvok(?:e|es|ed|ing|ers?)\b|\bus(?:e|es|ed|ing|ers|ages?)\b"
        r"|\breferenc(?:e|es|ed|ing)\b|\bdepend(?:s|ing)?\s+on\b",
    ),
    (
        "members",
        r"\b(?:defined|declared|contained|live|lives|living|found|exported|present)\s+(?:in|by)\b"
        r"|\bmembers?\b|\bcontents?\s+of\b|\bcontain(?:s|ed)?\b",
    ),
)
_RELATION_RE = tuple((rel, re.compile(p, _I)) for rel, p in RELATION_WORDS)

#: Kind nouns: which unit kinds the question asks for ("which *functions* in file X").
KIND_NOUNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (r"\bmethods?\b", ("method",)),
    (r"\b(?:functions?|funcs?|helpers?|constructors?|factor(?:y|ies))\b", ("function", "method")),
    (
        r"\b(?:types?|structs?|classes|class|interfaces?|enums?|records?)\b",
        ("type", "class", "interface", "enum", "struct"),
    ),
    (r"\b(?:constants?|consts?)\b", ("const",)),
    (r"\b(?:variables?|vars?|globals?)\b", ("var", "variable")),
)
_KIND_RE = tuple((re.compile(p, _I), kinds) for p, kinds in KIND_NOUNS)

#: A set question asks for a list: a question word, a list verb or a plural relation noun.
_SET_SHAPE = re.compile(
    r"^\s*(?:which|what|who|whom|where|list|show|find|give|name|enumerate|get|all|every)\b"
    r"|\b(?:which|what|who|all|every|list\s+of|set\s+of)\b"
    r"|\b(?:implementations|implementers|implementors|subclasses|callers|callees|usages|subcommands|handlers"
    r"|methods|members|routes|endpoints)\b"
    r"|\b(?:types|classes|structs|functions|interfaces|constants|variables|commands)"
    r"\s+(?:that|which|in|defined|declared|of|on|\w+ing|\w+ed)\b|\bapi\s+of\b",
    _I,
)
_PUBLIC = re.compile(r"\b(?:public|exported|external|visible)\b", _I)
_TESTS = re.compile(r"\b(?:tests?|testing|specs?|benchmarks?|fuzz)\b", _I)
#: "in file X", "in X.go", "in the render package", "in package binding", "under binding/"
_SCOPE = re.compile(
    r"\b(?:in|inside|within|from|under|of)\s+(?:the\s+)?(?:(?:source\s+)?(?:file|module|package|directory|folder|dir)\s+)?"
    r"`?(?P<scope>[\w./-]+?\.(?:go|py|ts|tsx|js|jsx|mjs|rs|java|rb|md)|[\w./-]+/)`?(?=[\s?.,;:!]|$)"
    r"|\b(?:in|inside|within|from|of)\s+(?:the\s+)?package\s+`?(?P<pkg1>[\w./-]+)`?"
    r"|\b(?:in|inside|within|from|of)\s+(?:the\s+)?`?(?P<pkg2>[\w./-]+)`?\s+package\b",
    _I,
)
#: Words that never name an anchor: question words, articles, relation and kind words.
_STOP_TEXT = """
live lives living
a an the of on in into to for from by with and or all every each any which what who whose where
when how that this these those there is are was were be been do does did list show give find me
us i we you it its their them they our my your one ones kind kinds sort set sets of type types
struct structs class classes interface interfaces function functions func funcs method methods
member members constant constants const var vars variable variables field fields value values
state object objects instance instances code unit units symbol symbols definition definitions
declaration declarations defined declared public exported private unexported visible external
file files module modules package packages source directory folder its own other others
implement implements implemented implementing implementation implementations implementer
implementers satisfy satisfies conform conforms subclass subclasses extend extends extending
derive derives derived inherit inherits inheriting child descendant descendants register
registers registered registration registrations mount mounts mounted handler handlers route
routes endpoint endpoints callback callbacks passed mutate mutates mutating modify modifies
modifying change changes changing update updates updating write writes writing assign assigns
alter alters set sets setting store stores reset resets call calls caller callers callee callees
called calling invoke invokes invoked use uses used using user users usage reference references
referenced depend depends rely command commands subcommand subcommands added attached api
operation operations constructor constructors test tests go have has had can
could should would will exposes expose provide provides offer offers available receiver
receivers
"""
STOPWORDS = frozenset(_STOP_TEXT.split())
_QUESTION_WORDS = frozenset(
    [
        "which",
        "what",
        "who",
        "whom",
        "where",
        "how",
        "list",
        "show",
        "find",
        "give",
        "name",
        "enumerate",
        "get",
        "all",
        "every",
        "each",
        "the",
        "a",
        "an",
        "are",
        "is",
        "do",
        "does",
    ]
)


@dataclass(frozen=True)
class SetQuestion:
    """A parsed set question.

    `anchor` is the phrase naming the symbol the relation starts from (original case, may
    be "" when only a scope is given: "handlers registered in routes.go"); `scope` a file
    path, directory or package phrase the answer must lie in; `kinds` the unit kinds a kind
    noun asks for (empty: any); `public` asks for exported members only; `tests` whether the
    question is about tests (otherwise test units are left out of the set).
    """

    relation: str
    anchor: str
    scope: str = ""
    kinds: tuple[str, ...] = ()
    public: bool = False
    tests: bool = False


#: More content words than this around the relation word is a sentence, not an anchor name.
MAX_ANCHOR_WORDS = 4
_TOKEN = re.compile(r"`[^`]+`|[A-Za-z_][\w.]*(?:/[\w.]+)*|[\w./-]+")


def anchor_phrase(text: str) -> str:
    """The words of `text` that may name a symbol: stop, relation and kind words dropped."""
    words = []
    for tok in _TOKEN.findall(re.sub(r"(?<=\w)['\u2019]s\b", "", text)):
        core = tok.strip("`").rstrip(".")
        # a lowercase word may be English; `Store`, `fileops`-style backticked or dotted/underscored
        # tokens are names even when they spell a relation word
        named = tok.startswith("`") or core != core.lower() or any(c in core for c in "._/0123456789")
        if not core or (not named and core in STOPWORDS):
            continue
        words.append(core)
    return " ".join(words)


def parse_set_question(query: str) -> SetQuestion | None:
    """The set question `query` asks, or None when it names no set relation.

    Only the shape is checked here; whether the anchor exists is the resolver's job.
    """
    text = query.strip()
    if not text or len(text.split()) > 20 or not _SET_SHAPE.search(text):
        return None
    first = re.match(r"[A-Za-z]+\b", text)
    if first and first.group().lower() in _QUESTION_WORDS:  # sentence case: "Which types ..." is not a name
        text = first.group().lower() + text[first.end() :]
    scope = ""
    rest = text
    m = _SCOPE.search(text)
    if m:
        scope = (m.group("scope") or m.group("pkg1") or m.group("pkg2") or "").strip("`")
        rest = (text[: m.start()] + " " + text[m.end() :]).strip()
    relation = None
    span = (0, 0)
    for rel, pattern in _RELATION_RE:
        found = pattern.search(rest)
        if found:
            relation, span = rel, found.span()
            break
    if relation is None:
        if not scope:
            return None
        relation, span = "members", (len(rest), len(rest))
    if relation == "members" and not scope:
        # "members of X" / "what does X contain": the anchor is a file, package or type
        anchor = anchor_phrase(rest)
        if not anchor:
            return None
    kinds: tuple[str, ...] = ()
    for pattern, ks in _KIND_RE:
        if pattern.search(rest):
            kinds = ks
            break
    if relation == "registered" and not kinds:
        kinds = ("function", "method")
    if relation == "callees":
        inner = re.search(r"\bdoes\s+(?P<a>.+?)\s+(?:call|invoke|use|depend\s+on|rely\s+on)\b", rest, _I)
        anchor = anchor_phrase(inner.group("a")) if inner else ""
        if not anchor:
            anchor = anchor_phrase(rest[span[1] :]) or anchor_phrase(rest[: span[0]])
    else:
        after, before = anchor_phrase(rest[span[1] :]), anchor_phrase(rest[: span[0]])
        anchor = after or before
        if relation in ("methods", "mutators", "registered") and before and after:
            # "methods of Context that modify ...": the anchor sits before the relation word
            anchor = before if relation == "mutators" else after
    if relation == "members" and scope:
        anchor = ""  # "which functions live in auth.go": the scope is the anchor
    if len(anchor.split()) > MAX_ANCHOR_WORDS:
        # a sentence, not a name ("after the handlers finish, reply with the problems ...")
        return None
    if not anchor and not scope:
        return None
    return SetQuestion(
        relation=relation,
        anchor=anchor,
        scope=scope,
        kinds=kinds,
        public=bool(_PUBLIC.search(text)),
        tests=bool(_TESTS.search(text)),
    )
