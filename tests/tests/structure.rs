//! The shape of the `shared` crate, checked from its sources (issue 26):
//! - its top-level modules form no import loop: a module is a file's first
//!   path component under `shared/src`, an edge is any `crate::X` path outside
//!   `#[cfg(test)]` items and `tests.rs` files;
//! - no function outside tests is longer than 80 lines.
//!
//! A reader finds a feature by walking down the module tree; a loop means no
//! module can be understood (or tested) without the others in it, and a
//! function longer than a screen is read in pieces.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_FN_LINES: usize = 80;

fn shared_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/src")
}

/// Every `.rs` file under `dir`, except test-only files.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read shared/src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            out.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") && path.file_name().is_some_and(|n| n != "tests.rs") {
            out.push(path);
        }
    }
    out
}

/// The file's lines without the items marked `#[cfg(test)]`, with `//`
/// comments and string/char literals blanked so braces in them do not count.
fn production_lines(text: &str) -> Vec<String> {
    let lines: Vec<String> = blank_comments_and_literals(text).lines().map(str::to_string).collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim_start().starts_with("#[cfg(test)]") {
            i = end_of_item(&lines, i + 1) + 1;
            continue;
        }
        out.push(lines[i].clone());
        i += 1;
    }
    out
}

/// The index of the last line of the item starting at `start`: a `;`-ended
/// line before any brace, or the line closing its first brace.
fn end_of_item(lines: &[String], start: usize) -> usize {
    let mut depth = 0i64;
    let mut opened = false;
    for (i, line) in lines.iter().enumerate().skip(start) {
        for c in line.chars() {
            match c {
                '{' => {
                    depth += 1;
                    opened = true;
                }
                '}' => depth -= 1,
                ';' if !opened => return i,
                _ => {}
            }
        }
        if opened && depth <= 0 {
            return i;
        }
    }
    lines.len().saturating_sub(1)
}

/// `text` with comments removed and the insides of string and char literals
/// (raw and multi-line ones included) blanked, line breaks kept, so braces
/// in them do not count.
fn blank_comments_and_literals(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut j = i + 2;
            while j + 1 < chars.len() && !(chars[j] == '*' && chars[j + 1] == '/') {
                out.push(blank(chars[j]));
                j += 1;
            }
            i = j + 2;
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !ident_before(&chars, i) {
            let hashes = chars[i + 1..].iter().take_while(|c| **c == '#').count();
            if chars.get(i + 1 + hashes) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let close: String = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
            let body_start = i + 2 + hashes;
            let rest: String = chars[body_start..].iter().collect();
            let body_len = rest.find(&close).map(|b| rest[..b].chars().count()).unwrap_or(chars.len() - body_start);
            out.push('"');
            out.extend(chars[body_start..body_start + body_len].iter().map(|c| blank(*c)));
            out.push('"');
            i = body_start + body_len + close.chars().count();
        } else if c == '"' {
            out.push('"');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(blank(chars[i]));
                }
                i += 1;
            }
            out.push('"');
            i += 1;
        } else if c == '\'' && char_literal_end(&chars, i).is_some() {
            out.push_str("' '");
            i = char_literal_end(&chars, i).unwrap_or(i) + 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_before(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// Where the char literal opened at `i` closes (`'{'`, `'\''`, `'\u{7b}'`);
/// `None` for a lifetime (`'a`).
fn char_literal_end(chars: &[char], i: usize) -> Option<usize> {
    if chars.get(i + 1) == Some(&'\\') {
        (i + 3..(i + 12).min(chars.len())).find(|j| chars[*j] == '\'')
    } else {
        (chars.get(i + 2) == Some(&'\'')).then_some(i + 2)
    }
}

fn module_of(path: &Path, root: &Path) -> String {
    let rel = path.strip_prefix(root).expect("under shared/src");
    let first = rel.components().next().expect("a component").as_os_str().to_string_lossy().into_owned();
    first.trim_end_matches(".rs").to_string()
}

/// The top-level modules named by `crate::…` paths in `code`, including the
/// first segment of each item in a `crate::{a::x, b}` group.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().last();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue; // e.g. `$crate::` or `other_crate::`
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.extend(first_segment(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            out.extend(first_segment(&item));
        } else {
            out.extend(first_segment(rest));
        }
    }
    out
}

fn first_segment(path: &str) -> Option<String> {
    let name: String = path.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
    (!name.is_empty()).then_some(name)
}

type Graph = BTreeMap<String, BTreeSet<String>>;

fn module_graph() -> Graph {
    let root = shared_src();
    let mut modules: BTreeSet<String> = BTreeSet::new();
    let mut graph = Graph::new();
    for path in sources(&root) {
        let module = module_of(&path, &root);
        if module == "lib" {
            continue;
        }
        modules.insert(module.clone());
        let code = production_lines(&std::fs::read_to_string(&path).expect("read source")).join("\n");
        graph.entry(module.clone()).or_default().extend(crate_paths(&code).into_iter().filter(|m| *m != module));
    }
    // Items of the crate root (e.g. `crate::now_ms`) are not modules.
    for targets in graph.values_mut() {
        targets.retain(|m| modules.contains(m));
    }
    graph
}

/// The strongly connected components with more than one module (Tarjan).
fn loops(graph: &Graph) -> Vec<Vec<String>> {
    struct Tarjan<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        loops: Vec<Vec<String>>,
    }
    impl<'g> Tarjan<'g> {
        fn visit(&mut self, v: &'g str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            for w in self.graph.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.stack.contains(&w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let at = self.stack.iter().rposition(|m| *m == v).expect("on the stack");
                let component: Vec<String> = self.stack.drain(at..).map(str::to_string).collect();
                if component.len() > 1 {
                    self.loops.push(component);
                }
            }
        }
    }
    let mut t = Tarjan { graph, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), loops: Vec::new() };
    for v in graph.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    t.loops.iter_mut().for_each(|l| l.sort());
    t.loops
}

#[test]
fn the_shared_crate_has_no_import_loop_between_its_top_level_modules() {
    let graph = module_graph();
    assert!(graph.len() > 10, "found only {} modules under {}", graph.len(), shared_src().display());
    let loops = loops(&graph);
    let edges: Vec<String> =
        graph.iter().map(|(m, to)| format!("  {m} -> {}", to.iter().cloned().collect::<Vec<_>>().join(", "))).collect();
    assert!(loops.is_empty(), "import loops: {loops:?}\nthe graph:\n{}", edges.join("\n"));
}

#[test]
fn no_function_in_shared_is_longer_than_80_lines() {
    let root = shared_src();
    let mut long = Vec::new();
    for path in sources(&root) {
        let lines = production_lines(&std::fs::read_to_string(&path).expect("read source"));
        for (i, line) in lines.iter().enumerate() {
            if let Some(name) = fn_name(line) {
                let len = end_of_item(&lines, i) - i + 1;
                if len > MAX_FN_LINES {
                    long.push(format!("{}: fn {name}, {len} lines", path.strip_prefix(&root).unwrap().display()));
                }
            }
        }
    }
    assert!(long.is_empty(), "functions over {MAX_FN_LINES} lines:\n{}", long.join("\n"));
}

/// The name of the function a line declares, if it declares one.
fn fn_name(line: &str) -> Option<String> {
    let mut words = line.split_whitespace().peekable();
    while let Some(w) = words.peek() {
        if *w == "pub" || w.starts_with("pub(") || *w == "async" || *w == "const" || *w == "unsafe" || *w == "default" {
            words.next();
        } else {
            break;
        }
    }
    (words.next()? == "fn").then(|| first_segment(words.next().unwrap_or_default())).flatten()
}

#[test]
fn the_checks_see_what_they_check() {
    // The graph check finds a loop when there is one, and a group's items.
    let mut g = Graph::new();
    g.entry("a".into()).or_default().insert("b".into());
    g.entry("b".into()).or_default().insert("a".into());
    g.entry("c".into()).or_default().insert("a".into());
    assert_eq!(loops(&g), vec![vec!["a".to_string(), "b".to_string()]]);
    assert_eq!(
        crate_paths("use crate::{ids::UserId, store::{keys, attr}};\nlet x = crate::now_ms(); $crate::nope"),
        ["ids", "now_ms", "store"].into_iter().map(String::from).collect()
    );
    // Test items and braces in literals do not count.
    let lines = production_lines(
        "fn a<'a>() {\n  let c = '{'; let s = \"{\n}\"; // {\n  r#\"{\"#\n}\n#[cfg(test)]\nmod tests {\n  use crate::x;\n}\n",
    );
    assert_eq!(lines, vec!["fn a<'a>() {", "  let c = ' '; let s = \" ", " \"; ", "  \" \"", "}"]);
    assert_eq!(fn_name("    pub(crate) async fn run_calls<'a>("), Some("run_calls".into()));
}
