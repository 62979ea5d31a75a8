"""Probe the test-file prior and identifier spellings on Go's own net/http sources.

    .venv/bin/python scripts/probe_test_prior.py                       # /usr/lib/go/src/net/http
    .venv/bin/python scripts/probe_test_prior.py --root /path/to/go/src/net/http --k 5

Gold v2 has no test files, so it cannot show what the test prior does. Go's net/http
package (shipped with the Go toolchain, e.g. Debian's golang-go) is a real code base where
about 38% of the units are in `_test.go` files, close to the hold-out the issue describes.
The script builds a corpus from it (in a temporary directory), then runs every lexical
ranker with `test_prior` off and on over PROBE: 12 concept questions and 8 identifier
spellings written from the package documentation (never from ranker output), and prints,
per ranker, R@k per tier and the share of the top-k slots held by test units. It is a probe,
not a fixture: 20 questions are too few to choose anything by.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from evalpipe.corpus import load_jsonl_corpus
from evalpipe.corpus.__main__ import main as build_corpus
from evalpipe.rankers.lexical.bm25 import BM25Ranker
from evalpipe.rankers.lexical.bm25f import BM25FRanker
from evalpipe.rankers.lexical.exact import ExactSymbolRanker
from evalpipe.rankers.lexical.grep import GrepRanker
from evalpipe.rankers.lexical.winnow import WinnowRanker
from evalpipe.rankers.priors.test_prior import is_test_unit
from evalpipe.rankers.structure.graph import GraphRanker

#: (tier, question, expected unit IDs), from the net/http documentation.
PROBE: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "concept",
        "parse the cookies sent in a request header",
        ("cookie.go::readCookies", "request.go::Request.Cookies"),
    ),
    ("concept", "reply to a request with a redirect to another url", ("server.go::Redirect",)),
    ("concept", "serve static files from a directory tree", ("fs.go::FileServer",)),
    (
        "concept",
        "give up on a slow handler after a time limit and answer service unavailable",
        ("server.go::TimeoutHandler",),
    ),
    (
        "concept",
        "remove a leading part of the url path before passing the request on",
        ("server.go::StripPrefix",),
    ),
    ("concept", "guess the content type of data from its first bytes", ("sniff.go::DetectContentType",)),
    (
        "concept",
        "proxy that forwards incoming requests to a backend server",
        ("httputil/reverseproxy.go::ReverseProxy",),
    ),
    ("concept", "print a request in wire format for debugging", ("httputil/dump.go::DumpRequest",)),
    (
        "concept",
        "shut the server down gracefully without interrupting active connections",
        ("server.go::Server.Shutdown",),
    ),
    ("concept", "limit the size of a request body", ("request.go::MaxBytesReader",)),
    ("concept", "username and password from the authorization header", ("request.go::Request.BasicAuth",)),
    ("concept", "in-memory cookie store that follows the public suffix rules", ("cookiejar/jar.go::Jar",)),
    ("exact", "stripprefix", ("server.go::StripPrefix",)),
    ("exact", "detect_content_type", ("sniff.go::DetectContentType",)),
    ("exact", "max-bytes-reader", ("request.go::MaxBytesReader",)),
    ("exact", "timeouthandler", ("server.go::TimeoutHandler",)),
    ("exact", "reverse proxy", ("httputil/reverseproxy.go::ReverseProxy",)),
    ("exact", "listenandservetls", ("server.go::ListenAndServeTLS",)),
    ("exact", "where is readcookies defined", ("cookie.go::readCookies",)),
    ("exact", "parsemultipartform", ("request.go::Request.ParseMultipartForm",)),
)

RANKERS = {
    "bm25": lambda tp: BM25Ranker(test_prior=tp),
    "bm25f": lambda tp: BM25FRanker(test_prior=tp),
    "exact": lambda tp: ExactSymbolRanker(test_prior=tp),
    "grep": lambda tp: GrepRanker(test_prior=tp),
    "winnow": lambda tp: WinnowRanker(base=BM25FRanker(test_prior=tp), test_prior=tp),
    "graph": lambda tp: GraphRanker(base=BM25Ranker(test_prior=tp), intent=True, test_prior=tp),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--root", type=Path, default=Path("/usr/lib/go/src/net/http"), help="net/http sources"
    )
    parser.add_argument("--k", type=int, default=5, help="cutoff (default 5)")
    args = parser.parse_args(argv)
    if not (args.root / "server.go").is_file():
        print(
            f"probe_test_prior: error: {args.root} holds no net/http sources (server.go); give --root",
            file=sys.stderr,
        )
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "corpus.jsonl"
        print(f"building a corpus of {args.root} ...", file=sys.stderr)
        if build_corpus([str(args.root), "-o", str(out)]) != 0:
            return 1
        corpus = load_jsonl_corpus(out)
    missing = sorted({uid for _, _, ids in PROBE for uid in ids if uid not in corpus})
    if missing:
        print(f"probe_test_prior: error: units not in this net/http version: {missing}", file=sys.stderr)
        return 2
    tests = sum(is_test_unit(u) for u in corpus)
    print(f"corpus: {len(corpus)} units, {tests} in test files ({100 * tests / len(corpus):.0f}%)\n")
    k = args.k
    print(f"| ranker | test_prior | exact R@{k} | concept R@{k} | test units in top-{k} slots |")
    print("|---|---|---|---|---|")
    for name, make in RANKERS.items():
        for mode in ("off", "last"):
            ranker = make(mode)
            ranker.prepare(corpus)
            found: dict[str, list[bool]] = {"exact": [], "concept": []}
            slots = in_tests = 0
            for tier, query, expected in PROBE:
                ids = [h.id for h in ranker.search(query, k)]
                found[tier].append(bool(set(ids) & set(expected)))
                slots += len(ids)
                in_tests += sum(is_test_unit(corpus.units[corpus.index_of[i]]) for i in ids)
            cells = [f"{sum(v)}/{len(v)}" for v in (found["exact"], found["concept"])]
            share = 100 * in_tests / slots if slots else 0.0
            print(f"| {name} | {mode} | {cells[0]} | {cells[1]} | {share:.0f}% |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
