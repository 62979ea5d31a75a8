"""`evalpipe merge-judgements`: reviewed judge verdicts into a fixture, as a new version.

A judge's positives are suggestions until a person has read them. The run writes
them to `judged.tsv`; the reviewer deletes the rows they reject (or sets grade 0)
and merges the rest:

    evalpipe merge-judgements fixtures/gold.yaml judged.tsv -o fixtures/gold_v2.yaml

The fixture is edited as text, not re-dumped, so its comments, key order and
layout survive: each new ID is added to its case's `expected` list or mapping
(block entries carry the judge's reason as a comment), and `version` goes up by one.
The result is parsed back and must equal the intended fixture exactly, and it is
validated like any fixture (unknown case or unit IDs exit 2 naming the TSV line).

Two things make the new file stand on its own: a relative `corpus:` path is
rewritten for the output's folder (`-o` may name a file or a folder), so the merged
fixture loads from wherever it was written; and a provenance comment above `version`
records the judge (backend:model), its prompt version and the date it judged (from
the judged.tsv header), and the date of the merge.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import yaml

from evalpipe.core.files import read_json_text
from evalpipe.corpus import CorpusError, load_jsonl_corpus
from evalpipe.inputs.fixture import _case_lines, check_against_corpus, load_fixture, parse_cases
from evalpipe.judge import people
from evalpipe.judge.report import TSV_COLUMNS
from evalpipe.paths import resolve_path
from evalpipe.safety.cli_parser import CommandParser
from evalpipe.safety.errors import EvalpipeError, print_error


@dataclass(frozen=True)
class Row:
    line: int
    case_id: str
    unit_id: str
    grade: int
    reason: str


def read_verdicts(path: Path) -> list[Row]:
    """Rows of a judged.tsv with grade >= 1; `#` lines are comments, the first other line the header."""
    if not path.exists():
        raise EvalpipeError(f"{path}: no such file (the judged.tsv written by a run with a judge)")
    header: list[str] | None = None
    rows = []
    for n, raw in enumerate(read_json_text(path, "judged.tsv").splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        cells = raw.split("\t")
        if header is None:
            header = [c.strip() for c in cells]
            if "case_id" not in header or "unit_id" not in header:
                raise EvalpipeError(
                    f"{path}:{n}: the header must name the columns {', '.join(TSV_COLUMNS)} (tab-separated)"
                )
            continue
        rec = dict(zip(header, (c.strip() for c in cells), strict=False))
        if not rec.get("case_id") or not rec.get("unit_id"):
            raise EvalpipeError(f"{path}:{n}: a row needs case_id and unit_id (tab-separated)")
        try:
            grade = int(rec.get("grade") or 1)
        except ValueError:
            raise EvalpipeError(f"{path}:{n}: grade must be an integer, got {rec['grade']!r}") from None
        if grade >= 1:
            rows.append(Row(n, rec["case_id"], rec["unit_id"], grade, rec.get("reason") or ""))
    return rows


@dataclass(frozen=True)
class Provenance:
    judge: str = "unknown judge"
    prompt: str = "unknown prompt"
    judged: str = "unknown date"

    def comment(self, merged: str) -> str:
        return f"provenance: judge {self.judge}, prompt {self.prompt}, judged {self.judged}, merged {merged}"


_HEADER = re.compile(
    r"^#\s*judge:\s*(?P<judge>[^;]+);\s*prompt:\s*(?P<prompt>[^;]+);\s*judged:\s*(?P<date>\S+)"
)
_OLD_HEADER = re.compile(r"^#\s*Positive verdicts of (?P<judge>\S+), prompt (?P<prompt>[^,\s]+)")


def read_provenance(path: Path) -> Provenance:
    """Who judged, with which prompt and when, from the comment lines a run writes atop judged.tsv."""
    for raw in read_json_text(path, "judged.tsv").splitlines():
        if not raw.lstrip().startswith("#"):
            break
        m = _HEADER.match(raw.strip())
        if m:
            return Provenance(m["judge"].strip(), m["prompt"].strip(), m["date"].strip())
        m = _OLD_HEADER.match(raw.strip())
        if m:
            return Provenance(m["judge"], m["prompt"])
    return Provenance()


def _plain(value: str) -> str:
    """The ID as a YAML scalar: plain when it reads back unchanged in every position we use, else quoted."""
    probes = (f"- {value}", f"[{value}]", f"{{{value}: 1}}", f"{value}: 1")
    wanted = ([value], [value], {value: 1}, {value: 1})
    try:
        if all(yaml.safe_load(p) == w for p, w in zip(probes, wanted, strict=True)):
            return value
    except yaml.YAMLError:
        pass
    return json.dumps(value)


def _comment(reason: str) -> str:
    reason = " ".join(reason.split())[:150]
    return f"  # judged: {reason}" if reason and reason != "-" else "  # judged"


def _line_end(text: str, index: int) -> int:
    """Index just after the newline ending the line that holds `index` (len(text) if none)."""
    nl = text.find("\n", index)
    return len(text) if nl < 0 else nl + 1


def _line_start(text: str, index: int) -> int:
    return text.rfind("\n", 0, index) + 1


def _mapping_get(node: yaml.MappingNode, key: str) -> tuple[yaml.Node, yaml.Node] | None:
    for k, v in node.value:
        if isinstance(k, yaml.ScalarNode) and k.value == key:
            return k, v
    return None


def _case_edit(text: str, case: yaml.MappingNode, add: list[Row], where: str) -> tuple[int, int, str]:
    """(start, end, replacement) that adds the rows' IDs to this case's `expected`."""
    found = _mapping_get(case, "expected")
    if found is None or (isinstance(found[1], yaml.ScalarNode) and found[1].tag.endswith(":null")):
        raise EvalpipeError(f"{where}: case {add[0].case_id!r} has no expected list; add the IDs by hand")
    _, node = found
    if isinstance(node, yaml.ScalarNode):  # expected: one-id  ->  expected: [one-id, new]
        original = text[node.start_mark.index : node.end_mark.index]
        items = ", ".join([original] + [_plain(r.unit_id) for r in add])
        return node.start_mark.index, node.end_mark.index, f"[{items}]"
    if node.flow_style:  # [a, b] or {a: 2}
        close = node.end_mark.index - 1
        empty = not node.value
        if isinstance(node, yaml.SequenceNode):
            new = [_plain(r.unit_id) for r in add]
        else:
            new = [f"{_plain(r.unit_id)}: {r.grade}" for r in add]
        return close, close, ("" if empty else ", ") + ", ".join(new)
    # Block list or mapping: new lines after the last entry, indented like the first.
    if isinstance(node, yaml.SequenceNode):
        first, last = node.value[0], node.value[-1]
        indent = text[_line_start(text, first.start_mark.index) : first.start_mark.index]
        lines = [f"{indent}{_plain(r.unit_id)}{_comment(r.reason)}\n" for r in add]
    else:
        first, last = node.value[0][0], node.value[-1][1]
        indent = text[_line_start(text, first.start_mark.index) : first.start_mark.index]
        lines = [f"{indent}{_plain(r.unit_id)}: {r.grade}{_comment(r.reason)}\n" for r in add]
    at = _line_end(text, max(last.end_mark.index - 1, last.start_mark.index))
    prefix = "" if at == 0 or text[at - 1] == "\n" else "\n"
    return at, at, prefix + "".join(lines)


def _as_mapping(
    text: str, case: yaml.MappingNode, exp: Any, add: list[Row], where: str
) -> tuple[int, int, str]:
    """(start, end, replacement) that rewrites a plain `expected` list (all grade 1) as a flow mapping
    holding the new grades too (people's labels keep grade 0 and 2)."""
    found = _mapping_get(case, "expected")
    if found is None:
        raise EvalpipeError(f"{where}: case {add[0].case_id!r} has no expected list; add the IDs by hand")
    key, node = found
    old_ids = [exp] if isinstance(exp, str) else list(exp or [])
    items = [f"{_plain(i)}: 1" for i in old_ids] + [f"{_plain(r.unit_id)}: {r.grade}" for r in add]
    start, end = node.start_mark.index, node.end_mark.index
    if not node.flow_style and isinstance(node, yaml.SequenceNode):
        # A block list (indented or not) is replaced from just after `expected:`, so the mapping
        # sits on the key's line whatever the list's indentation was.
        start = text.index(":", key.end_mark.index) + 1
        end = node.end_mark.index
        end = start + len(text[start:end].rstrip())  # a block list's span ends past its last newline
        return start, end, " {" + ", ".join(items) + "}"
    return start, end, "{" + ", ".join(items) + "}"


def _version_edit(text: str, root: yaml.MappingNode, version: Any, notes: list[str]) -> tuple[int, int, str]:
    lead = "".join(f"# {n}\n" for n in notes)
    found = _mapping_get(root, "version")
    if found is not None:
        key, value = found
        start = _line_start(text, key.start_mark.index)
        return start, value.end_mark.index, f"{lead}version: {version}"
    cases_key = _mapping_get(root, "cases")
    assert cases_key is not None
    start = _line_start(text, cases_key[0].start_mark.index)
    return start, start, f"{lead}version: {version}\n"


def _corpus_edit(root: yaml.MappingNode, new: str) -> tuple[int, int, str]:
    found = _mapping_get(root, "corpus")
    assert found is not None and isinstance(found[1], yaml.ScalarNode)
    node = found[1]
    return node.start_mark.index, node.end_mark.index, _plain(new)


def corpus_for(ref: str, fixture: Path, output: Path) -> str | None:
    """The `corpus:` value that names the same file from `output`'s folder; None if `ref` still does.

    The loader resolves a relative path against the fixture's folder first (then the working
    directory, then the project root), so the new value is the path relative to the new folder."""

    if not ref or Path(ref).expanduser().is_absolute():
        return None
    target = resolve_path(ref, base=fixture.parent)
    here = output.parent.resolve()
    if resolve_path(ref, base=here) == target and (here / Path(ref).expanduser()).exists():
        return None
    try:
        return Path(os.path.relpath(target, here)).as_posix()
    except ValueError:  # another drive (Windows): only an absolute path works
        return target.as_posix()


def merge_text(
    text: str,
    rows: Sequence[Row],
    where: str,
    tsv_name: str,
    version: Any = None,
    provenance: str = "",
    corpus: str | None = None,
    people: bool = False,
):
    """The fixture text with the rows merged, the intended data, and what was skipped as already there.
    `provenance`: a comment line recorded above `version`; `corpus`: a new `corpus:` value.
    `people`: the rows are people's labels (`judge.people`): grade 0 and 2 are kept, and a case whose
    expected IDs are a plain list is rewritten as a mapping to hold them."""
    data = yaml.safe_load(text)
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if not isinstance(data, dict) or not isinstance(root, yaml.MappingNode) or "cases" not in data:
        raise EvalpipeError(f"{where}: not a fixture (a mapping with name, corpus and cases)")
    cases_node = _mapping_get(root, "cases")[1]  # type: ignore[index]
    index = {str(c.get("id")): i for i, c in enumerate(data["cases"])}
    per_case: dict[str, list[Row]] = {}
    skipped: list[Row] = []
    for r in rows:
        if r.case_id not in index:
            raise EvalpipeError(f"{tsv_name}:{r.line}: case {r.case_id!r} is not in {where}")
        expected = data["cases"][index[r.case_id]].get("expected")
        labelled = [expected] if isinstance(expected, str) else list(expected or [])
        pending = [x.unit_id for x in per_case.get(r.case_id, [])]
        if r.unit_id in labelled or r.unit_id in pending:
            skipped.append(r)
        elif r.grade != 1 and not isinstance(expected, dict) and not people:
            raise EvalpipeError(
                f"{tsv_name}:{r.line}: grade {r.grade} for case {r.case_id!r}, whose expected IDs are a "
                "plain list (all grade 1): give grade 1 or make its expected a mapping"
            )
        else:
            per_case.setdefault(r.case_id, []).append(r)
    old = data.get("version")
    if version is None:
        if old is not None and (not isinstance(old, int) or isinstance(old, bool)):
            raise EvalpipeError(
                f"{where}: version {old!r} is not an integer: give the new one with --version"
            )
        version = (old or 1) + 1
    added = sum(len(v) for v in per_case.values())
    what = "people's labels" if people else "reviewed judge verdicts"
    note = f"version {version}: {added} {what} merged from {Path(tsv_name).name}"
    edits = [_version_edit(text, root, version, [n for n in (provenance, note) if n])]
    if corpus is not None:
        edits.append(_corpus_edit(root, corpus))
        data["corpus"] = corpus
    for cid, add in per_case.items():
        case = data["cases"][index[cid]]
        exp = case.get("expected")
        if people and not isinstance(exp, dict) and any(r.grade != 1 for r in add):
            edits.append(_as_mapping(text, cases_node.value[index[cid]], exp, add, where))
            old_ids = [exp] if isinstance(exp, str) else list(exp or [])
            case["expected"] = {**dict.fromkeys(old_ids, 1), **{r.unit_id: r.grade for r in add}}
            continue
        edits.append(_case_edit(text, cases_node.value[index[cid]], add, where))
        if isinstance(exp, dict):
            exp.update({r.unit_id: r.grade for r in add})
        else:
            case["expected"] = ([exp] if isinstance(exp, str) else list(exp)) + [r.unit_id for r in add]
    data["version"] = version
    for start, end, new in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        text = text[:start] + new + text[end:]
    try:
        same = yaml.safe_load(text) == data
    except yaml.YAMLError:
        same = False
    if not same:  # never hand back a fixture that says something else
        raise EvalpipeError(f"{where}: could not edit this layout safely; add the IDs by hand")
    return text, data, skipped, added


def output_path(fixture: Path, output: str | Path | None, version: Any) -> Path:
    """`-o` as given; a folder (existing, or written with a trailing slash) gets the default name."""
    name = f"{fixture.stem}_v{version}{fixture.suffix}"
    if output is None:
        return fixture.with_name(name)
    if Path(output).is_dir() or str(output).endswith(("/", os.sep)):
        return Path(output) / name
    return Path(output)


def is_people_labels(path: Path) -> bool:
    """A labels file of `evalpipe label` (JSONL), not a judge's judged.tsv."""
    return path.name.endswith(".jsonl")


def _people_rows(fixture: Path, labels: Path, rule: str | None) -> tuple[list[Row], list[people.Merged]]:
    try:
        sha = load_fixture(fixture).sha256
    except EvalpipeError:
        raise
    except Exception as exc:
        raise EvalpipeError(f"{fixture}: {exc}") from None
    merged = people.merged_labels(labels, sha, rule)
    rows = [Row(m.line, m.case_id, m.unit_id, m.grade, m.who) for m in merged]
    return rows, merged


def merge(
    fixture: Path, tsv: Path, output: str | Path | None, version: Any = None, rule: str | None = None
) -> tuple[Path, int, list[Row]]:

    if not fixture.is_file():
        raise EvalpipeError(f"{fixture}: no such fixture file")
    by_people = is_people_labels(tsv)
    merged: list[people.Merged] = []
    if by_people:
        rows, merged = _people_rows(fixture, tsv, rule)
    else:
        if rule is not None:
            raise EvalpipeError(
                f"--rule {rule}: a rule settles disagreeing people's labels (a .labels.jsonl)"
            )
        rows = read_verdicts(tsv)
    source = fixture.read_text(encoding="utf-8")
    _, data, _, _ = merge_text(
        source, rows, str(fixture), str(tsv), version, people=by_people
    )  # checks rows, finds version
    out = output_path(fixture, output, data["version"])
    ref = data.get("corpus")
    corpus_ref = corpus_for(ref, fixture, out) if isinstance(ref, str) else None
    today = date.today().isoformat()
    note = people.provenance_note(merged, today) if by_people else read_provenance(tsv).comment(today)
    text, data, skipped, added = merge_text(
        source, rows, str(fixture), str(tsv), data["version"], note, corpus_ref, people=by_people
    )
    cases = parse_cases(data["cases"], str(fixture), _case_lines(text))
    try:
        corpus = load_jsonl_corpus(resolve_path(ref or "", base=fixture.parent))
    except CorpusError as exc:
        raise EvalpipeError(f"{fixture}: corpus: {exc}") from None
    missing = [r for r in rows if r.unit_id not in corpus]
    if missing:
        raise EvalpipeError(
            f"{tsv}:{missing[0].line}: unit {missing[0].unit_id!r} is not in the fixture's corpus"
        )
    check_against_corpus(cases, corpus, str(fixture))
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        if by_people:  # who judged each merged label, how and when: beside the new fixture
            provenance_path(out).write_text(
                "".join(json.dumps(m.record()) + "\n" for m in merged), encoding="utf-8"
            )
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise EvalpipeError(f"cannot write {out}: {exc.strerror or exc}") from None
    return out, added, skipped


def provenance_path(out: Path) -> Path:
    """`gold_v4.yaml` -> `gold_v4.provenance.jsonl`: every merged person's label with who, how, when."""
    return out.with_name(f"{out.stem}.provenance.jsonl")


def main(argv: Sequence[str]) -> int:
    parser = CommandParser(
        prog="evalpipe merge-judgements",
        description="Merge reviewed judge verdicts (a run's judged.tsv) or people's labels (evalpipe label) "
        "into a fixture as a new version.",
    )
    parser.add_argument("fixture", type=Path, help="the fixture YAML the run used")
    parser.add_argument(
        "verdicts",
        type=Path,
        help="the reviewed judged.tsv (rows with grade >= 1 are merged), or people's labels "
        "(<batch>.labels.jsonl from evalpipe label: every grade, 0 included, with who/how/when)",
    )
    parser.add_argument(
        "-o",
        "--output",
        help="new fixture file, or a folder for <fixture>_v<N>.yaml (default: beside the fixture); "
        "a relative corpus path is rewritten to resolve from there",
    )
    parser.add_argument("--version", type=int, help="the new fixture version (default: the old one + 1)")
    parser.add_argument(
        "--rule",
        choices=people.RULES,
        help="people's labels: settle assessors who disagree by the max, min or majority grade "
        "(default: refuse, one line per conflict)",
    )
    args = parser.parse_args(argv)
    try:
        out, added, skipped = merge(args.fixture, args.verdicts, args.output, args.version, args.rule)
    except people.Conflicts as exc:
        print_error(exc.lines[0], prog="evalpipe merge-judgements", more=exc.lines[1:])
        return 2
    except EvalpipeError as exc:
        print_error(exc)
        return 2
    already = f"; {len(skipped)} already labelled, skipped" if skipped else ""
    print(f"merged {added} judged IDs into {out}{already}")
    moved = yaml.safe_load(out.read_text(encoding="utf-8")).get("corpus")
    original = yaml.safe_load(args.fixture.read_text(encoding="utf-8")).get("corpus")
    if moved != original:
        print(f"corpus path rewritten for {out.parent}: {original} -> {moved}")
    return 0
