//! `cargo xtask test`'s layout step: the crates keep the shape the architecture names.
//!
//! Two rules, checked on the sources without building anything:
//! - **No import circles** among the child modules of the core (`crates/ofi-nostd/src`)
//!   and of the safe API (`crates/hosted/src/api`): a module that needs another's types
//!   and is needed by it means one of them holds something that belongs in a leaf below
//!   both. The nodes are the children of the directory (a child's own submodules count
//!   as the child) and the parent file (`lib.rs` / `mod.rs`) for the items it defines
//!   itself; the edges are `crate::x`, `super::x` and, in the parent, `x::` references in
//!   code that is neither a comment nor test code. `mod x;` lines and `pub use`
//!   re-exports in the parent are not edges (a re-export is a path, not a dependency);
//!   a child naming a re-exported item depends on the child that defines it.
//! - **No long production file** in `wire`, `ofi-nostd` and `provider`: at most
//!   [`MAX_LINES`] lines before a file's unit tests (`#[cfg(test)]` at column 0); test
//!   files (`tests.rs`, `*_tests.rs`) do not count.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use crate::cmd::Result;
use crate::ws::Workspace;

/// Directories whose child modules must not import each other in a circle.
pub const ACYCLIC: [&str; 2] = ["crates/ofi-nostd/src", "crates/hosted/src/api"];

/// Crates whose production files must stay short.
pub const SHORT_FILES: [&str; 3] = [
    "crates/wire/src",
    "crates/ofi-nostd/src",
    "crates/provider/src",
];

/// The longest a production source file of [`SHORT_FILES`] may be.
pub const MAX_LINES: usize = 1200;

/// The node of the parent file's own items.
const PARENT: &str = "<parent>";

/// Runs both checks; the error lists every circle and every long file.
pub fn check(ws: &Workspace) -> Result {
    let mut problems = Vec::new();
    for dir in ACYCLIC {
        let tree = ModuleTree::read(&ws.path(dir))?;
        for circle in tree.circles() {
            problems.push(format!("{dir}: import circle {}", describe(&tree, &circle)));
        }
    }
    for dir in SHORT_FILES {
        for (file, lines) in long_files(&ws.path(dir))? {
            problems.push(format!(
                "{}: {lines} lines of production code (at most {MAX_LINES})",
                file.strip_prefix(ws.path("")).unwrap_or(&file).display()
            ));
        }
    }
    if problems.is_empty() {
        println!(
            "layout: no import circles in {}; no production file above {MAX_LINES} lines in {}",
            ACYCLIC.join(", "),
            SHORT_FILES.join(", ")
        );
        Ok(())
    } else {
        Err(format!("layout:\n  {}", problems.join("\n  ")))
    }
}

/// `a -> b -> a` for a circle, with each member's edges inside it.
fn describe(tree: &ModuleTree, circle: &[String]) -> String {
    let inside: BTreeSet<&str> = circle.iter().map(String::as_str).collect();
    circle
        .iter()
        .map(|m| {
            let to: Vec<&str> = tree
                .edges
                .get(m)
                .into_iter()
                .flatten()
                .map(String::as_str)
                .filter(|t| inside.contains(t))
                .collect();
            format!("{m} -> {}", to.join(" "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The child modules of one directory and what each refers to.
#[derive(Debug, Default)]
pub struct ModuleTree {
    /// Child module -> the nodes it refers to (never itself).
    pub edges: BTreeMap<String, BTreeSet<String>>,
}

impl ModuleTree {
    /// Reads `dir` (with a `lib.rs` or `mod.rs`) from disk.
    pub fn read(dir: &Path) -> Result<Self> {
        let root = dir.join("lib.rs").exists();
        let parent = if root { "lib.rs" } else { "mod.rs" };
        let parent_src = fs::read_to_string(dir.join(parent))
            .map_err(|e| format!("{}: {e}", dir.join(parent).display()))?;
        let mut children: BTreeMap<String, Vec<(PathBuf, String)>> = BTreeMap::new();
        for entry in fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
            let path = entry.map_err(|e| e.to_string())?.path();
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("")
                .to_owned();
            let source = path.extension().is_some_and(|e| e == "rs")
                && path.file_name() != Some(parent.as_ref());
            if path.is_dir() || source {
                children.entry(name).or_default();
            }
        }
        for (name, files) in &mut children {
            let file = dir.join(format!("{name}.rs"));
            if file.exists() {
                files.push((file.clone(), read(&file)?));
            }
            let sub = dir.join(name);
            if sub.is_dir() {
                for f in rust_files(&sub)? {
                    let src = read(&f)?;
                    files.push((f, src));
                }
            }
        }
        let sources: BTreeMap<String, Vec<Source>> = children
            .into_iter()
            .map(|(n, fs)| {
                let top = [dir.join(format!("{n}.rs")), dir.join(&n).join("mod.rs")];
                let srcs = fs
                    .into_iter()
                    .filter(|(p, _)| !is_test_file(p))
                    .map(|(p, code)| Source {
                        top: top.contains(&p),
                        code,
                    })
                    .collect();
                (n, srcs)
            })
            .collect();
        Ok(Self::from_sources(root, &parent_src, &sources))
    }

    /// The tree from sources in memory: `root` says whether the parent is the crate root
    /// (`lib.rs`: children are reached as `crate::x`) or a module (`mod.rs`: as
    /// `super::x` from its children).
    pub fn from_sources(
        root: bool,
        parent: &str,
        children: &BTreeMap<String, Vec<Source>>,
    ) -> Self {
        let parent_code = production_code(parent);
        let mut reexports = BTreeMap::new();
        for line in parent_code.lines() {
            if let Some((child, names)) = reexport(line) {
                for n in names {
                    reexports.insert(n, child.clone());
                }
            }
        }
        let resolver = Resolver {
            root,
            children,
            reexports: &reexports,
        };
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (name, srcs) in children {
            for src in srcs {
                let from = if src.top {
                    From::Child
                } else {
                    From::Grandchild
                };
                for t in resolver.targets(&production_code(&src.code), from) {
                    if t != *name {
                        edges.entry(name.clone()).or_default().insert(t);
                    }
                }
            }
        }
        let own: String = parent_code
            .lines()
            .filter(|l| {
                !is_mod_decl(l) && reexport(l).is_none() && !l.trim_start().starts_with("pub use")
            })
            .collect::<Vec<_>>()
            .join("\n");
        for t in resolver.targets(&own, From::Parent) {
            if t != PARENT {
                edges.entry(PARENT.to_owned()).or_default().insert(t);
            }
        }
        ModuleTree { edges }
    }

    /// Every set of two or more modules that reach each other (Tarjan's strongly
    /// connected components), each sorted.
    pub fn circles(&self) -> Vec<Vec<String>> {
        let mut nodes: BTreeSet<&str> = self.edges.keys().map(String::as_str).collect();
        for to in self.edges.values() {
            nodes.extend(to.iter().map(String::as_str));
        }
        let mut t = Tarjan {
            tree: self,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            next: 0,
            out: Vec::new(),
        };
        for n in nodes {
            if !t.index.contains_key(n) {
                t.visit(n);
            }
        }
        t.out
    }
}

/// State of one run of Tarjan's algorithm.
struct Tarjan<'a> {
    tree: &'a ModuleTree,
    index: BTreeMap<&'a str, usize>,
    low: BTreeMap<&'a str, usize>,
    stack: Vec<&'a str>,
    next: usize,
    out: Vec<Vec<String>>,
}

impl<'a> Tarjan<'a> {
    fn visit(&mut self, v: &'a str) {
        self.index.insert(v, self.next);
        self.low.insert(v, self.next);
        self.next += 1;
        self.stack.push(v);
        for w in self.tree.edges.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !self.index.contains_key(w) {
                self.visit(w);
                let lw = self.low[w];
                let lv = self.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if self.stack.contains(&w) {
                let iw = self.index[w];
                let lv = self.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if self.low[v] == self.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = self.stack.pop() {
                comp.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                self.out.push(comp);
            }
        }
    }
}

/// One source file of a child module.
#[derive(Debug, Clone)]
pub struct Source {
    /// The child's own file (`x.rs` or `x/mod.rs`), whose `super::` is the parent; in
    /// deeper files `super::` stays inside the child.
    pub top: bool,
    /// The file's text.
    pub code: String,
}

/// Whose code a reference is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum From {
    /// The parent file's own items.
    Parent,
    /// A child's own file.
    Child,
    /// A file below a child's own.
    Grandchild,
}

/// Turns a path's first segment into a node.
struct Resolver<'a> {
    root: bool,
    children: &'a BTreeMap<String, Vec<Source>>,
    reexports: &'a BTreeMap<String, String>,
}

impl Resolver<'_> {
    /// The nodes `code`, written in `from`, refers to.
    fn targets(&self, code: &str, from: From) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        let mut prefixes: Vec<&str> = vec![if self.root { "crate::" } else { "crate::api::" }];
        match from {
            From::Child => prefixes.push("super::"),
            From::Parent => prefixes.push("self::"),
            From::Grandchild => {}
        }
        for prefix in prefixes {
            for first in after_prefix(code, prefix) {
                match self.node(&first) {
                    Some(n) => {
                        out.insert(n);
                    }
                    None if !matches!(first.as_str(), "self" | "super" | "crate") => {
                        out.insert(PARENT.to_owned());
                    }
                    None => {}
                }
            }
        }
        if from == From::Parent {
            // The parent names its children directly: `cq::Cq`.
            for first in after_prefix(code, "") {
                if let Some(n) = self.node(&first) {
                    out.insert(n);
                }
            }
        }
        out
    }

    fn node(&self, name: &str) -> Option<String> {
        if self.children.contains_key(name) {
            Some(name.to_owned())
        } else {
            self.reexports.get(name).cloned()
        }
    }
}

/// The first path segments after each `prefix` in `code` (`prefix{a, b::c}` gives `a`
/// and `b`); an empty prefix takes every `name::` that no other segment precedes.
fn after_prefix(code: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while i < code.len() {
        let Some(pos) = code[i..].find(if prefix.is_empty() { "::" } else { prefix }) else {
            break;
        };
        let at = i + pos;
        i = at + prefix.len().max(2);
        if prefix.is_empty() {
            // `name::` with no `::` or identifier before `name`.
            let mut s = at;
            while s > 0 && ident(bytes[s - 1]) {
                s -= 1;
            }
            let before = &code[..s];
            if s == at || before.ends_with("::") || before.ends_with(['\'', '"']) {
                continue;
            }
            out.push(code[s..at].to_owned());
            continue;
        }
        if at > 0 && (ident(bytes[at - 1]) || bytes[at - 1] == b':') {
            continue;
        }
        let rest = &code[i..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = matching_brace(group);
            for item in split_top(&group[..end]) {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|&c| c.is_ascii_alphanumeric() || c == '_')
                    .collect();
                if !name.is_empty() {
                    out.push(name);
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|&c| c.is_ascii_alphanumeric() || c == '_')
                .collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
    }
    out
}

/// Where the `{`-group that `s` starts inside ends.
fn matching_brace(s: &str) -> usize {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return i,
            '}' => depth -= 1,
            _ => {}
        }
    }
    s.len()
}

/// The comma-separated items of a use group, nested groups kept whole.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// `pub use child::{A, B};` -> (`child`, [`A`, `B`]).
fn reexport(line: &str) -> Option<(String, Vec<String>)> {
    let l = line.trim_start();
    let rest = l.strip_prefix("pub use ").or_else(|| {
        let after = l.strip_prefix("pub(")?;
        after.split_once(") use ").map(|(_, r)| r)
    })?;
    let rest = rest.strip_prefix("self::").unwrap_or(rest);
    let (child, items) = rest.split_once("::")?;
    let items = items.trim_end_matches(';');
    let names = if let Some(g) = items.strip_prefix('{') {
        split_top(&g[..matching_brace(g)])
            .into_iter()
            .filter_map(|i| last_name(i.trim()))
            .collect()
    } else {
        last_name(items).into_iter().collect()
    };
    Some((child.to_owned(), names))
}

/// The name an item of a use list is known by (`a::B as C` -> `C`).
fn last_name(item: &str) -> Option<String> {
    let item = item.rsplit(" as ").next()?.trim();
    let name = item.rsplit("::").next()?.trim();
    (!name.is_empty() && name != "*").then(|| name.to_owned())
}

/// `mod x;` or `pub mod x;`.
fn is_mod_decl(line: &str) -> bool {
    let l = line.trim();
    let l = l
        .strip_prefix("pub ")
        .or_else(|| l.strip_prefix("pub(crate) "))
        .unwrap_or(l);
    l.starts_with("mod ") && l.ends_with(';')
}

/// `src` without comments, `#[cfg(test)]` items and string contents that could look
/// like paths (doc links are comments, so they never count).
pub fn production_code(src: &str) -> String {
    let mut out = String::new();
    let mut skip: Option<i64> = None;
    let mut cfg_test = false;
    for line in src.lines() {
        let code = strip_comment(line);
        let trimmed = code.trim();
        if let Some(depth) = skip.as_mut() {
            *depth += braces(&code);
            if *depth <= 0 {
                skip = None;
            }
            continue;
        }
        if trimmed.starts_with("#[cfg(test)]") {
            cfg_test = true;
            continue;
        }
        if cfg_test {
            if trimmed.starts_with("#[") || trimmed.is_empty() {
                continue;
            }
            cfg_test = false;
            let depth = braces(&code);
            if depth > 0 {
                skip = Some(depth);
            }
            continue;
        }
        out.push_str(&code);
        out.push('\n');
    }
    out
}

/// Net `{` minus `}` of a line.
fn braces(code: &str) -> i64 {
    code.chars()
        .map(|c| match c {
            '{' => 1,
            '}' => -1,
            _ => 0,
        })
        .sum()
}

/// A line without its `//` comment and with string literals emptied.
fn strip_comment(line: &str) -> String {
    let mut out = String::new();
    let mut in_str = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if in_str {
            match c {
                '\\' => {
                    chars.next();
                }
                '"' => {
                    in_str = false;
                    out.push('"');
                }
                _ => {}
            }
            continue;
        }
        match c {
            '"' => {
                in_str = true;
                out.push('"');
            }
            '/' if chars.peek() == Some(&'/') => break,
            _ => out.push(c),
        }
    }
    out
}

/// `tests.rs`, `*_tests.rs` or anything under a `tests/` directory.
fn is_test_file(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name == "tests.rs"
        || name.ends_with("_tests.rs")
        || p.components().any(|c| c.as_os_str() == "tests")
}

fn read(p: &Path) -> Result<String> {
    fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in fs::read_dir(&d).map_err(|e| format!("{}: {e}", d.display()))? {
            let p = entry.map_err(|e| e.to_string())?.path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Production files under `dir` longer than [`MAX_LINES`], with their length.
fn long_files(dir: &Path) -> Result<Vec<(PathBuf, usize)>> {
    let mut out = Vec::new();
    for f in rust_files(dir)? {
        if is_test_file(&f) {
            continue;
        }
        let n = production_lines(&read(&f)?);
        if n > MAX_LINES {
            out.push((f, n));
        }
    }
    Ok(out)
}

/// Lines before the file's inline unit tests (`#[cfg(test)]` at column 0 followed by
/// `mod name {`; a `mod tests;` declaration is not where the code ends).
pub fn production_lines(src: &str) -> usize {
    let lines: Vec<&str> = src.lines().collect();
    let inline = |n: &&str| n.starts_with("mod ") && n.trim_end().ends_with('{');
    for (i, l) in lines.iter().enumerate() {
        if l.starts_with("#[cfg(test)]") && lines.get(i + 1).is_some_and(inline) {
            return i;
        }
    }
    lines.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(root: bool, parent: &str, children: &[(&str, &str)]) -> ModuleTree {
        let map = children
            .iter()
            .map(|(n, s)| {
                (
                    n.to_string(),
                    vec![Source {
                        top: true,
                        code: s.to_string(),
                    }],
                )
            })
            .collect();
        ModuleTree::from_sources(root, parent, &map)
    }

    #[test]
    fn a_crate_root_circle_is_found_and_a_chain_is_not() {
        let parent = "pub mod a;\npub mod b;\npub mod c;\npub use a::Thing;\n";
        let chain = tree(
            true,
            parent,
            &[
                ("a", "use crate::b::X;"),
                ("b", "use crate::c::{Y, z::W};"),
                ("c", ""),
            ],
        );
        assert!(chain.circles().is_empty());
        let circle = tree(
            true,
            parent,
            &[
                ("a", "use crate::b::X;"),
                ("b", "fn f() { crate::c::g() }"),
                ("c", "use crate::{Thing, d};"),
            ],
        );
        assert_eq!(
            circle.circles(),
            vec![vec!["a".to_owned(), "b".into(), "c".into()]]
        );
    }

    #[test]
    fn comments_doc_links_strings_and_test_code_are_not_edges() {
        let b = "//! See [`crate::a::A`].\n/// [`A`]: crate::a::A\nconst S: &str = \"crate::a::A\";\n#[cfg(test)]\nmod tests {\n    use crate::a::A;\n}\n";
        let t = tree(
            true,
            "mod a;\nmod b;\n",
            &[("a", "use crate::b::B;"), ("b", b)],
        );
        assert!(t.circles().is_empty(), "{:?}", t.edges);
        let t = tree(
            true,
            "mod a;\nmod b;\n",
            &[
                ("a", "use crate::b::B;"),
                ("b", "fn f() -> crate::a::A { todo() } // crate::x"),
            ],
        );
        assert_eq!(t.circles().len(), 1);
    }

    #[test]
    fn a_module_parent_counts_for_its_own_items_not_its_reexports() {
        let parent = "mod cq;\nmod shared;\npub use cq::Completion;\npub(crate) type Core = u8;\n";
        // A child using a re-export depends on the child that defines it.
        let t = tree(
            false,
            parent,
            &[
                ("cq", "use super::shared::Inner;"),
                ("shared", "use super::Completion;"),
            ],
        );
        assert_eq!(t.circles(), vec![vec!["cq".to_owned(), "shared".into()]]);
        // The parent's own item, used by a child that the parent's code uses: a circle.
        let parent2 = format!("{parent}fn open() {{ shared::Inner::new() }}\n");
        let t = tree(
            false,
            &parent2,
            &[("cq", ""), ("shared", "use super::Core;")],
        );
        assert_eq!(t.circles(), vec![vec![PARENT.to_owned(), "shared".into()]]);
        // Without the parent's call it is a plain dependency.
        let t = tree(false, parent, &[("cq", ""), ("shared", "use super::Core;")]);
        assert!(t.circles().is_empty());
    }

    #[test]
    fn super_below_a_childs_own_file_stays_inside_the_child() {
        let deep = Source {
            top: false,
            code: "use super::Domain; use crate::b::B;".into(),
        };
        let own = Source {
            top: true,
            code: "pub struct Domain; mod msg;".into(),
        };
        let map = [("a".to_owned(), vec![own, deep]), ("b".to_owned(), vec![])]
            .into_iter()
            .collect();
        let t = ModuleTree::from_sources(true, "mod a;\nmod b;\n", &map);
        assert_eq!(t.edges["a"], ["b".to_owned()].into_iter().collect());
    }

    #[test]
    fn production_lines_stop_at_the_unit_tests() {
        assert_eq!(production_lines("a\nb\n#[cfg(test)]\nmod tests {\n}\n"), 2);
        assert_eq!(production_lines("#[cfg(test)]\nmod tests;\nb\n"), 3);
        assert_eq!(production_lines("a\n#[cfg(test)]\nfn helper() {}\nb\n"), 4);
    }
}
