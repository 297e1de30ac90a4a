"""scripts/check-cycles on tiny synthetic crates: a circle is found (through `use crate::`,
`super::`, a child module's name and a re-export), a layered tree passes, and paths in comments,
strings and doc links do not count."""

import importlib.machinery
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
_loader = importlib.machinery.SourceFileLoader(
    "check_cycles", os.path.join(HERE, "..", "check-cycles")
)
_spec = importlib.util.spec_from_loader("check_cycles", _loader)
check_cycles = importlib.util.module_from_spec(_spec)
_loader.exec_module(check_cycles)


def crate(tmp_path, files):
    """Writes `files` (path under src/ -> text) and returns the crate directory."""
    for rel, text in files.items():
        path = tmp_path / "src" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


LAYERED = {
    "lib.rs": "mod a;\nmod b;\npub use a::Leaf;\n",
    # A visibility path names a module without depending on it.
    "a.rs": "pub struct Leaf;\npub(in crate::b) fn hidden() {}\n",
    # b names a through the crate root's re-export: the edge goes to a.rs, not lib.rs.
    "b.rs": 'use crate::Leaf;\n// crate::b::x in a comment\nconst S: &str = "crate::b";\n'
    "/// [`crate::b::f`]\npub fn f(_: Leaf) {}\n",
}


def test_layered_tree_has_no_circle(tmp_path, capsys):
    root = crate(tmp_path, LAYERED)
    graph = check_cycles.build_graph(str(root / "src"))
    assert graph["b.rs"] == {"a.rs"}
    assert graph["a.rs"] == set()
    assert check_cycles.cycles(graph) == []
    assert check_cycles.main([str(root)]) == 0
    assert "no import circles (3 files)" in capsys.readouterr().out


def test_circle_through_super_child_and_use_tree_is_found(tmp_path, capsys):
    files = {
        "lib.rs": "mod d;\nmod leaf;\n",
        "leaf.rs": "pub fn f() {}\n",
        # d/mod.rs uses its child by name; the child uses its parent through super::.
        "d/mod.rs": "mod x;\npub struct Hub;\nfn g() { x::run(); crate::leaf::f(); }\n",
        "d/x.rs": "use super::{Hub, super::leaf::f as g};\npub fn run() {}\n",
    }
    root = crate(tmp_path, files)
    graph = check_cycles.build_graph(str(root / "src"))
    assert graph["d/x.rs"] == {"d/mod.rs", "leaf.rs"}
    assert check_cycles.cycles(graph) == [["d/mod.rs", "d/x.rs"]]
    assert check_cycles.main([str(root)]) == 1
    out = capsys.readouterr().out
    assert "import circle of 2 files" in out
    assert "d/x.rs -> d/mod.rs" in out


def test_allow_list_reports_without_failing(tmp_path, monkeypatch):
    files = {
        "lib.rs": "mod a;\nmod b;\n",
        "a.rs": "use crate::b::B;\npub struct A;\n",
        "b.rs": "pub struct B(crate::a::A);\n",
    }
    root = crate(tmp_path / "mycrate", files)
    assert check_cycles.main([str(root)]) == 1
    monkeypatch.setenv("CHECK_CYCLES_ALLOW", "other,mycrate")
    assert check_cycles.main([str(root)]) == 0


def test_inline_test_module_super_is_the_file_itself(tmp_path):
    files = {
        "lib.rs": "mod a;\n",
        "a.rs": "fn f() {}\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
    }
    graph = check_cycles.build_graph(str(crate(tmp_path, files) / "src"))
    assert graph["a.rs"] == set()
