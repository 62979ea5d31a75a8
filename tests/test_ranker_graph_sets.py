"""Set questions (issue 17): the grammar, anchor resolution and structural answers on small
hand-built corpora, and the graph ranker leaving every other question to its base."""

from __future__ import annotations

import pytest

from evalpipe.core import Hit, Unit
from evalpipe.corpus import Corpus
from evalpipe.rankers.structure.graph import GraphRanker
from evalpipe.rankers.structure.graph_structure import (
    StructureIndex,
    interface_methods,
    is_public,
    mutates_receiver,
    receiver_name,
    squash,
)
from evalpipe.rankers.structure.set_questions import SetQuestion, parse_set_question


def unit(uid: str, kind: str, text: str = "", language: str = "go", **meta) -> Unit:
    path, _, qual = uid.partition("::")
    relations = meta.pop("relations", {})
    name = qual.rsplit(".", 1)[-1] if qual else path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    signature = meta.pop("signature", text.split("\n", 1)[0])
    return Unit(
        id=uid,
        kind=kind,
        title=qual or path,
        text=text,
        path=path,
        language=language,
        relations=relations,
        metadata={"name": name, "qualname": qual, "signature": signature, **meta},
    )


# ---- a Go package: an interface satisfied implicitly, a registration file, mutating methods ----
GO = [
    unit(
        "store/store.go",
        "module",
        "package store",
        package="store",
        relations={"contains": ["store/store.go::Store"]},
    ),
    unit(
        "store/store.go::Store",
        "interface",
        "type Store interface\n\nStore keeps items.\n\nStore interface {\n\tGet(key string) (Item, bool)\n"
        "\tPut(key string, it Item) error\n}",
        package="store",
    ),
    unit(
        "store/store.go::Closer",
        "interface",
        "type Closer interface\n\nCloser interface {\n\tStore\n\tClose() error\n}",
        package="store",
    ),
    # memStore: Get, Put, Close -> implements Store and Closer; Put and Close assign to fields
    unit(
        "store/mem.go::memStore",
        "type",
        "type memStore struct\n\nmemStore struct {\n\titems map[string]Item\n}",
        package="store",
    ),
    unit(
        "store/mem.go::memStore.Get",
        "method",
        "func (m *memStore) Get(key string) (Item, bool)\n\n"
        "it, ok := m.items[key]\nif m.items[key] == nil {\n}\nreturn it, ok",
        package="store",
        parent="store/mem.go::memStore",
    ),
    unit(
        "store/mem.go::memStore.Put",
        "method",
        "func (m *memStore) Put(key string, it Item) error\n\nm.items[key] = it\nreturn nil",
        package="store",
        parent="store/mem.go::memStore",
    ),
    unit(
        "store/mem.go::memStore.Close",
        "method",
        "func (m *memStore) Close() error\n\nm.items = nil\nreturn nil",
        package="store",
        parent="store/mem.go::memStore",
    ),
    # diskStore: Get and Put only -> implements Store, not Closer; Put counts with ++
    unit("store/disk.go::diskStore", "type", "type diskStore struct", package="store"),
    unit(
        "store/disk.go::diskStore.Get",
        "method",
        "func (d diskStore) Get(key string) (Item, bool)\n\nreturn read(d.dir, key)",
        package="store",
        parent="store/disk.go::diskStore",
    ),
    unit(
        "store/disk.go::diskStore.Put",
        "method",
        "func (d *diskStore) Put(key string, it Item) error\n\nd.writes++\nreturn write(d.dir, key, it)",
        package="store",
        parent="store/disk.go::diskStore",
    ),
    unit(
        "store/disk.go::diskStore.path",
        "method",
        "func (d diskStore) path(key string) string\n\nreturn d.dir + key",
        package="store",
        parent="store/disk.go::diskStore",
    ),
    # cache: Get only -> implements neither
    unit("store/cache.go::cache", "type", "type cache struct", package="store"),
    unit(
        "store/cache.go::cache.Get",
        "method",
        "func (c *cache) Get(key string) (Item, bool)\n\nreturn c.m[key]",
        package="store",
        parent="store/cache.go::cache",
    ),
    # a test double in a test file: implements Store, but is a test
    unit("store/mem_test.go::fakeStore", "type", "type fakeStore struct", package="store"),
    unit(
        "store/mem_test.go::fakeStore.Get",
        "method",
        "func (f *fakeStore) Get(key string) (Item, bool)",
        package="store",
        parent="store/mem_test.go::fakeStore",
    ),
    unit(
        "store/mem_test.go::fakeStore.Put",
        "method",
        "func (f *fakeStore) Put(key string, it Item) error",
        package="store",
        parent="store/mem_test.go::fakeStore",
    ),
    # handlers and their registration
    unit(
        "api/handlers.go::listItems",
        "function",
        "func listItems(w http.ResponseWriter, r *http.Request)",
        package="api",
    ),
    unit(
        "api/handlers.go::getItem",
        "function",
        "func getItem(w http.ResponseWriter, r *http.Request)",
        package="api",
    ),
    unit(
        "api/handlers.go::server.deleteItem",
        "method",
        "func (s *server) deleteItem(w http.ResponseWriter, r *http.Request)",
        package="api",
    ),
    unit("api/handlers.go::helper", "function", "func helper() int\n\nreturn 1", package="api"),
    unit(
        "api/routes.go::setupRoutes",
        "function",
        'func setupRoutes(mux *Mux, s *server)\n\nmux.Handle("/items", listItems)\n'
        'mux.Handle("/item", getItem)\nmux.Handle("/del", s.deleteItem)\nn := helper()\nlog(n)',
        package="api",
    ),
    unit(
        "api/routes.go",
        "module",
        "package api",
        package="api",
        relations={"contains": ["api/routes.go::setupRoutes"]},
    ),
    # cobra-style commands
    unit("cmd/root.go::rootCmd", "var", 'rootCmd = &cobra.Command{Use: "app"}', package="cmd"),
    unit("cmd/serve.go::serveCmd", "var", 'serveCmd = &cobra.Command{Use: "serve"}', package="cmd"),
    unit("cmd/version.go::newVersionCmd", "function", "func newVersionCmd() *cobra.Command", package="cmd"),
    unit(
        "cmd/root.go::init",
        "function",
        "func init()\n\nrootCmd.AddCommand(serveCmd, newVersionCmd())",
        package="cmd",
    ),
    # a second type named like a compound ("response writer")
    unit(
        "api/writer.go::ResponseWriter",
        "interface",
        "type ResponseWriter interface\n\nResponseWriter interface {\n\tStatus() int\n}",
        package="api",
    ),
    unit("api/writer.go::responseWriter", "type", "type responseWriter struct", package="api"),
    unit(
        "api/writer.go::responseWriter.Status",
        "method",
        "func (w *responseWriter) Status() int\n\nreturn w.status",
        package="api",
        parent="api/writer.go::responseWriter",
    ),
    unit(
        "api/writer.go::responseWriter.WriteHeader",
        "method",
        "func (w *responseWriter) WriteHeader(code int)\n\nw.status = code",
        package="api",
        parent="api/writer.go::responseWriter",
    ),
]
GO_CORPUS = Corpus(GO)
IDS = GO_CORPUS.ids


def ids(rows) -> list[str]:
    return sorted(IDS[r] for r in rows)


@pytest.fixture(scope="module")
def go() -> StructureIndex:
    return StructureIndex(GO_CORPUS)


def ask(index: StructureIndex, question: str) -> list[str]:
    parsed = parse_set_question(question)
    assert parsed is not None, question
    return ids(index.answer(parsed).members)


# ---- the grammar ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "relation", "anchor"),
    [
        # implementations
        ("which types implement Store", "implementations", "Store"),
        ("what implements the Store interface?", "implementations", "Store"),
        ("implementations of io.Writer", "implementations", "io.Writer"),
        ("list the structs that satisfy `Renderer`", "implementations", "Renderer"),
        ("types conforming to the Binding interface", "implementations", "Binding"),
        ("which classes conform to Serializable", "implementations", "Serializable"),
        ("Store implementers", "implementations", "Store"),
        ("who implements response writer", "implementations", "response writer"),
        # subclasses
        ("subclasses of EvalpipeError", "subclasses", "EvalpipeError"),
        ("which classes extend BaseRanker", "subclasses", "BaseRanker"),
        ("what derives from Node", "subclasses", "Node"),
        ("classes inheriting from HTTPException", "subclasses", "HTTPException"),
        ("every child class of Shape", "subclasses", "Shape"),
        # mutation
        ("which methods of memStore modify its fields", "mutators", "memStore"),
        ("methods that mutate the diskStore struct", "mutators", "diskStore"),
        ("what methods change Context state", "mutators", "Context"),
        ("which Engine methods update the engine", "mutators", "Engine"),
        ("methods writing to the Session object", "mutators", "Session"),
        # registrations and handlers
        ("which handlers does setupRoutes register", "registered", "setupRoutes"),
        ("what handlers are mounted on the mux", "registered", "mux"),
        ("functions passed as callbacks to setupRouter", "registered", "setupRouter"),
        # subcommands
        ("subcommands of rootCmd", "subcommands", "rootCmd"),
        ("which commands are added to the root command", "subcommands", "root"),
        ("what sub-commands does serveCmd have", "subcommands", "serveCmd"),
        # methods of a type
        ("methods of the Corpus class", "methods", "Corpus"),
        ("which public methods does RouterGroup have", "methods", "RouterGroup"),
        ("the exported API of Client", "methods", "Client"),
        ("list memStore's methods", "methods", "memStore"),
        # callers / callees
        ("who uses parseAccept", "callers", "parseAccept"),
        ("which functions invoke helper", "callers", "helper"),
        ("callers of Corpus.allowed_mask", "callers", "Corpus.allowed_mask"),
        ("what references newVersionCmd", "callers", "newVersionCmd"),
        ("what does Engine.ServeHTTP call", "callees", "Engine.ServeHTTP"),
        ("which functions are called by setupRoutes", "callees", "setupRoutes"),
        ("callees of handleRequest", "callees", "handleRequest"),
    ],
)
def test_grammar_relation_and_anchor(query, relation, anchor):
    parsed = parse_set_question(query)
    assert parsed is not None
    assert (parsed.relation, parsed.anchor) == (relation, anchor)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (
            "handlers registered in api/routes.go",
            SetQuestion("registered", "", scope="api/routes.go", kinds=("function", "method")),
        ),
        (
            "functions in package render",
            SetQuestion("members", "", scope="render", kinds=("function", "method")),
        ),
        (
            "which types are defined in the binding package",
            SetQuestion(
                "members", "", scope="binding", kinds=("type", "class", "interface", "enum", "struct")
            ),
        ),
        ("what is declared in store/mem.go", SetQuestion("members", "", scope="store/mem.go")),
        (
            "which exported functions live in auth.go",
            SetQuestion("members", "", scope="auth.go", kinds=("function", "method"), public=True),
        ),
        (
            "which test types implement Store",
            SetQuestion(
                "implementations", "Store", kinds=("type", "class", "interface", "enum", "struct"), tests=True
            ),
        ),
    ],
)
def test_grammar_scope_kinds_public_tests(query, expected):
    assert parse_set_question(query) == expected


@pytest.mark.parametrize(
    "query",
    [
        "how do I set a cookie",
        "merge two settings",
        "parse the request body as JSON",
        "ShouldBindJSON",
        "Context.AbortWithStatusJSON",
        "retry a failed upload with backoff",
        "once the handlers return, write out every error they gathered as one list for the client",
        "where is the configuration file read",
        "",
    ],
)
def test_grammar_leaves_other_questions(query):
    assert parse_set_question(query) is None


# ---- anchors in several spellings --------------------------------------------------------------


@pytest.mark.parametrize(
    "spelling",
    ["ResponseWriter", "`ResponseWriter`", "response writer", "response_writer", "api.ResponseWriter"],
)
def test_anchor_spellings_resolve_to_the_interface(go, spelling):
    assert ids(go.resolve(spelling, {"interface"})) == ["api/writer.go::ResponseWriter"]


def test_anchor_resolution_prefers_exact_case_and_kind(go):
    # both ResponseWriter (interface) and responseWriter (type) squash alike: exact case wins
    assert ids(go.resolve("responseWriter", None)) == ["api/writer.go::responseWriter"]
    assert ids(go.resolve("ResponseWriter", None)) == ["api/writer.go::ResponseWriter"]
    # kind decides when the spelling does not: only a type may anchor "methods of"
    assert ids(go.resolve("responsewriter", {"type"})) == ["api/writer.go::responseWriter"]
    assert go.resolve("nothing like this", None) == []
    assert squash("Response_Writer") == squash("response writer") == "responsewriter"


# ---- structural answers ---------------------------------------------------------------------------


def test_go_implicit_interfaces_from_method_sets(go):
    assert "implements" not in go.present  # inferred, the corpus has no such edges
    assert ask(go, "which types implement Store") == ["store/disk.go::diskStore", "store/mem.go::memStore"]
    # Closer embeds Store and adds Close: only memStore has all three methods
    assert ask(go, "what satisfies the Closer interface") == ["store/mem.go::memStore"]
    # the test double is an implementation only when tests are asked for
    assert "store/mem_test.go::fakeStore" in ask(go, "which test types implement Store")
    assert ask(go, "implementations of response writer") == ["api/writer.go::responseWriter"]


def test_interface_methods_parsed_from_text():
    methods, embeds = interface_methods(GO[2])
    assert (methods, embeds) == ({"Close"}, ["Store"])
    ts = unit(
        "a.ts::Shape",
        "interface",
        "interface Shape {\n  area(): number;\n  name?(): string;\n  id: string;\n}",
        "typescript",
    )
    assert interface_methods(ts)[0] == {"area", "name"}


def test_implements_edges_are_used_when_present():
    # TypeScript: `class Circle implements Shape` recorded by the builder; Square only extends Circle
    corpus = Corpus(
        [
            unit("s.ts::Shape", "interface", "interface Shape {\n  area(): number;\n}", "typescript"),
            unit(
                "s.ts::Circle",
                "class",
                "class Circle implements Shape",
                "typescript",
                relations={"implements": ["s.ts::Shape"]},
            ),
            unit(
                "s.ts::Square",
                "class",
                "class Square extends Circle",
                "typescript",
                relations={"inherits": ["s.ts::Circle"]},
            ),
            # has an area() method but the builder says nothing: edges present, so no inference
            unit("s.ts::Blob", "class", "class Blob", "typescript"),
            unit(
                "s.ts::Blob.area", "method", "area(): number { return 0 }", "typescript", parent="s.ts::Blob"
            ),
        ]
    )
    index = StructureIndex(corpus)
    answer = index.answer(parse_set_question("which classes implement Shape"))
    assert [corpus.ids[r] for r in answer.members] == ["s.ts::Circle", "s.ts::Square"]
    assert [corpus.ids[r] for r in index.answer(parse_set_question("subclasses of Circle")).members] == [
        "s.ts::Square"
    ]


def test_registration_file_and_function(go):
    registered = [
        "api/handlers.go::getItem",
        "api/handlers.go::listItems",
        "api/handlers.go::server.deleteItem",
    ]
    # helper() is called, not passed: not a registration
    assert ask(go, "handlers registered in api/routes.go") == registered
    assert ask(go, "which handlers does setupRoutes register") == registered
    assert ask(go, "handlers registered in routes.go") == registered  # a basename names the file too


def test_registration_edges_are_used_when_present():
    corpus = Corpus(
        [
            unit(
                "r.go::setup",
                "function",
                'func setup(r *Router)\n\nr.GET("/", index)',
                relations={"references": ["r.go::index"]},
            ),
            unit("r.go::index", "function", "func index(c *Ctx)"),
            unit("r.go::other", "function", "func other(c *Ctx)"),
        ]
    )
    answer = StructureIndex(corpus).answer(parse_set_question("which handlers are registered by setup"))
    assert [corpus.ids[r] for r in answer.members] == ["r.go::index"]


def test_mutating_methods(go):
    assert ask(go, "which methods of memStore modify its fields") == [
        "store/mem.go::memStore.Close",
        "store/mem.go::memStore.Put",
    ]
    assert ask(go, "methods that mutate diskStore") == ["store/disk.go::diskStore.Put"]
    assert ask(go, "what methods change the responseWriter") == ["api/writer.go::responseWriter.WriteHeader"]


@pytest.mark.parametrize(
    ("language", "signature", "body", "mutates"),
    [
        ("go", "func (c *Ctx) Set(k string, v any)", "c.mu.Lock()\nc.Keys[k] = v", True),
        ("go", "func (c *Ctx) Reset()", "*c = Ctx{}", True),
        ("go", "func (c *Ctx) Drop(k string)", "delete(c.Keys, k)", True),
        ("go", "func (c *Ctx) Pair()", "c.a, c.b = 1, 2", True),
        (
            "go",
            "func (c *Ctx) Has(k string) bool",
            "if c.Keys[k] == nil {\n\treturn false\n}\nx := c.n\nreturn x != 0",
            False,
        ),
        ("go", "func (_ *Ctx) Noop()", "x = 1", False),
        ("go", "func Free(c *Ctx)", "c.n = 1", False),  # a function, not a method: no receiver
        ("python", "def add(self, item)", "self.items.append(item)", True),
        ("python", "def bump(self)", "self.count += 1", True),
        ("python", "def total(self)", "return sum(self.items) == self.count", False),
        ("typescript", "set(key: string, v: V): void", "this.cache.set(key, v);", True),
        ("typescript", "size(): number", "return this.items.length;", False),
        ("typescript", "reset(): void", "this.count = 0;", True),
    ],
)
def test_receiver_field_assignment(language, signature, body, mutates):
    u = unit("x::T.m", "method", f"{signature}\n\n{body}", language, signature=signature)
    assert mutates_receiver(u) is mutates


def test_receiver_names():
    assert receiver_name(unit("x::T.m", "method", "func (srv *Server) m()")) == "srv"
    assert receiver_name(unit("x::T.m", "method", "def m(this_one, x):", "python")) == "this_one"
    assert receiver_name(unit("x::T.m", "method", "m(): void", "typescript")) == "this"


def test_subcommands_from_add_command_text(go):
    assert "subcommands" not in go.present
    assert ask(go, "subcommands of rootCmd") == ["cmd/serve.go::serveCmd", "cmd/version.go::newVersionCmd"]


def test_methods_public_and_members(go):
    assert ask(go, "methods of diskStore") == [
        "store/disk.go::diskStore.Get",
        "store/disk.go::diskStore.Put",
        "store/disk.go::diskStore.path",
    ]
    assert ask(go, "the exported methods of diskStore") == [
        "store/disk.go::diskStore.Get",
        "store/disk.go::diskStore.Put",
    ]
    assert ask(go, "which functions are in package cmd") == [
        "cmd/root.go::init",
        "cmd/version.go::newVersionCmd",
    ]
    # members of a file skip the file's test twin and the module unit itself
    assert ask(go, "what is defined in store/mem.go") == [
        "store/mem.go::memStore",
        "store/mem.go::memStore.Close",
        "store/mem.go::memStore.Get",
        "store/mem.go::memStore.Put",
    ]


def test_is_public_by_language():
    assert is_public(unit("a.go::Get", "function")) and not is_public(unit("a.go::get", "function"))
    assert is_public(unit("a.py::get", "function", language="python"))
    assert not is_public(unit("a.py::_get", "function", language="python"))
    assert not is_public(unit("a.ts::C.get", "method", "private get(): void", "typescript"))


# ---- the ranker ---------------------------------------------------------------------------------


class FixedBase:
    """A base ranker that always returns the same list, so the expected order is known."""

    def __init__(self, ids: list[str]):
        self.ids = ids

    def search(self, query, k, constraints=None):
        return [Hit(i, 1.0 / (r + 1)) for r, i in enumerate(self.ids)][:k]


BASE = ["api/handlers.go::helper", "store/mem.go::memStore.Put", "store/cache.go::cache"]


@pytest.fixture(scope="module")
def ranker() -> GraphRanker:
    graph = GraphRanker(FixedBase(BASE), intent=True)
    graph.prepare(GO_CORPUS)
    return graph


def test_ranker_puts_the_set_first_ordered_by_the_base(ranker):
    hits = ranker.search("which methods of memStore modify its fields", 10)
    # members: Put (base rank 2: 3 + 0.3 x 1/2 = 3.15) before Close (3.0); then the anchor (1.5);
    # then the base's other hits at 1/rank
    assert [(h.id, round(h.score, 6)) for h in hits] == [
        ("store/mem.go::memStore.Put", 3.15),
        ("store/mem.go::memStore.Close", 3.0),
        ("store/mem.go::memStore", 1.5),
        ("api/handlers.go::helper", 1.0),
        ("store/cache.go::cache", round(1 / 3, 6)),
    ]


@pytest.mark.parametrize(
    "query",
    [
        "merge two settings",
        "how do I set a cookie",
        "store an item under a key",
        "memStore",
        "which types implement NoSuchInterface",  # relational, but the anchor resolves to nothing
        "methods of helper",  # helper is a function: no type anchors "methods of"
    ],
)
def test_other_questions_keep_the_base_ranking(ranker, query):
    assert [h.id for h in ranker.search(query, 10)] == BASE


def test_constraints_and_switch(ranker):
    hits = ranker.search("which types implement Store", 10, {"path_prefix": "store/disk"})
    assert [h.id for h in hits][:1] == ["store/disk.go::diskStore"]
    off = GraphRanker(FixedBase(BASE), intent=True, set_questions=False)
    off.prepare(GO_CORPUS)
    assert [h.id for h in off.search("which methods of memStore modify its fields", 10)] == BASE
