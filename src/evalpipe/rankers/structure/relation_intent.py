"""Relation intent: which code relation a question asks about, and about which symbol.

"what calls top_k" asks for the units that call `top_k` (relation `called_by` from the
seed `top_k`); "which functions does RRFRanker._fuse call" for `calls` from `_fuse`;
"subclasses of EvalpipeError" for `inherited_by`; "methods of the Corpus class" for
`contains`; "which modules import the trec module" for `imported_by`. A question that
matches no pattern has no relation intent, and the graph ranker leaves it to its base.

Patterns are plain regular expressions over the lowercased question, tried in order;
the named group `target` is the phrase that names the seed symbol (in the question's
original case, since symbol lookup is case-sensitive).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_WHO = r"(?:what|who|which\b[\w\s'`.]*?|where\s+(?:is|are)\b[\w\s'`.]*?)"
_THING = (
    r"(?:functions?|methods?|classes|class|code|helpers?|callers?|rankers?|modules?|readers?|units?|parts?)"
)

#: (relation, pattern) in priority order; `target` names the seed.
PATTERNS: tuple[tuple[str, str], ...] = (
    # callees: "what does X call", "which functions does X call", "functions called by X"
    (
        "calls",
        r"\b(?:what|which)\b.*?\bdoes\s+(?P<target>.+?)\s+(?:call|use|invoke|dispatch\s+to|rely\s+on)\b",
    ),
    ("calls", rf"\b{_THING}\s+(?:called|used|invoked)\s+by\s+(?P<target>.+)$"),
    ("calls", r"\bcallees\s+of\s+(?P<target>.+)$"),
    # imports
    ("imported_by", r"\b(?:modules?|files?|who|what|which)\b.*?\bimports?\s+(?P<target>.+)$"),
    # subclasses / implementations
    ("inherited_by", r"\b(?:subclass(?:es)?|implementations?|implementers?)\s+of\s+(?P<target>.+)$"),
    (
        "inherited_by",
        r"\b(?:subclass|subclasses|extends?|(?:inherits?|derives?)\s+from|implements?)\s+(?P<target>.+)$",
    ),
    # bases
    ("inherits", r"\b(?:base\s+class(?:es)?|parents?|superclass(?:es)?)\s+of\s+(?P<target>.+)$"),
    # members
    ("contains", r"\b(?:methods|members|fields)\s+(?:of|in|belong(?:ing)?\s+to)\s+(?P<target>.+)$"),
    # callers: "what calls X", "who calls X", "callers of X", "where is X used", "functions that call X"
    ("called_by", r"\bcallers?\s+of\s+(?P<target>.+)$"),
    (
        "called_by",
        r"\bwhere\s+(?:is|are)\s+(?P<target>.+?)\s+(?:used|called|raised|constructed|created|instantiated|consumed|invoked)\b",
    ),
    (
        "called_by",
        r"\b(?:that|which)\s+(?:call|calls|use|uses|raise|raises|invoke|invokes)\s+(?P<target>.+)$",
    ),
    (
        "called_by",
        rf"\b(?:what|who|which)(?:\s+{_THING})?\s+(?:calls|uses|raises|invokes|constructs|consumes)\s+(?P<target>.+)$",
    ),
    ("called_by", rf"\b{_THING}\s+(?:call|use|raise|invoke)\s+(?P<target>.+)$"),
)
_COMPILED = tuple((rel, re.compile(p)) for rel, p in PATTERNS)
#: A longer "target" is a sentence, not a symbol name ("every subclass constructor was called
#: with so they can ..."): such a question is not treated as relational, unless the target
#: describes the symbol in a relative clause ("the function that builds the gain arrays").
MAX_TARGET_WORDS = 5
_DESCRIBED = re.compile(
    r"^(?:the|a|an)\s+[\w-]+(?:\s+[\w-]+){0,2}\s+(?:that|which|whose)\s+(?P<what>.+)$", re.IGNORECASE
)
_LEAD = re.compile(r"^(?:the|a|an|class|function|method|module)\s+|['`]s?$|\?$")
_TAIL = re.compile(r"\s+(?:class|classes|function|method|module|dataclass(?:es)?)$|[?.!]+$")


@dataclass(frozen=True)
class RelationIntent:
    """`relation` (a graph edge kind) to follow from the symbol named by `target`.

    `described` is true when the target is a description ("builds the gain arrays", from
    "the function that builds ...") rather than a name: its seeds come from the base ranker.
    """

    relation: str
    target: str
    described: bool = False


def clean_target(text: str) -> str:
    """Strip articles, possessives, kind words and punctuation around the named symbol."""
    text = text.strip().strip("`")
    for _ in range(3):
        new = _TAIL.sub("", _LEAD.sub("", text.strip())).strip().strip("`")
        if new == text:
            break
        text = new
    return text


def detect_relation(query: str) -> RelationIntent | None:
    """The first matching relation pattern, or None when the question is not relational."""
    lowered = query.lower()
    for relation, pattern in _COMPILED:
        m = pattern.search(lowered)
        if m:
            start, end = m.span("target")
            raw = query[start:end].strip().rstrip("?.!")
            described = _DESCRIBED.match(raw)
            if described:
                return RelationIntent(relation, described.group("what").strip(), described=True)
            target = clean_target(raw)
            if target and len(target.split()) <= MAX_TARGET_WORDS:
                return RelationIntent(relation, target)
            return None
    return None
