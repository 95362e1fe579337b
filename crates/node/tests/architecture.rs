//! Keeps the node's layers as ARCHITECTURE.md draws them: no two files
//! import each other in a circle, and no import points up a layer.
//!
//! Imports are read as text (`crate::…` and `super::…` paths outside test
//! modules), which is what a newcomer reads too; `cargo modules` would
//! need a nightly toolchain this project does not otherwise use.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers from the bottom up; a file may import its own layer and
/// those below.
const LAYERS: &[&[&str]] = &[
    &["shutdown"],
    &["local"],
    &["wire", "security"],
    &["cluster"],
    &["config", "metrics", "node", "requests", "api_client"],
    &["http"],
    &["server"],
    &["lib"],
];

fn layer(module: &str) -> usize {
    let top = module.split("::").next().unwrap_or(module);
    LAYERS
        .iter()
        .position(|names| names.contains(&top))
        .unwrap_or_else(|| {
            panic!("module {module} is in no layer: add it to LAYERS and ARCHITECTURE.md")
        })
}

/// Every file of `src`, by module path (`cluster::lookup`, `lib`).
fn modules(src: &Path) -> BTreeMap<String, String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(src, &mut files);
    files
        .into_iter()
        .map(|path| {
            let relative = path.strip_prefix(src).unwrap().with_extension("");
            let parts: Vec<String> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            let mut module = parts.join("::");
            if let Some(parent) = module.strip_suffix("::mod") {
                module = parent.to_owned();
            }
            let text = std::fs::read_to_string(&path).unwrap();
            // Test modules may reach anywhere.
            let code = match text.find("#[cfg(test)]\nmod tests") {
                Some(at) => text[..at].to_owned(),
                None => text,
            };
            (module, code)
        })
        .collect()
}

/// The modules `code` (of `module`) imports, resolved to files.
fn imports(module: &str, code: &str, files: &BTreeMap<String, String>) -> BTreeSet<String> {
    // `super` of `a::b` (a file b.rs, or a folder's b/mod.rs) is `a`.
    let own_folder: Vec<&str> = {
        let mut parts: Vec<&str> = module.split("::").collect();
        parts.pop();
        parts
    };
    let mut found = BTreeSet::new();
    for (at, _) in code
        .match_indices("crate::")
        .chain(code.match_indices("super::"))
    {
        let path: String = code[at..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        // `use super::*` is how an inline module (tests, serde helpers)
        // reaches its own file.
        if path == "super::" {
            continue;
        }
        let mut parts: Vec<String> = Vec::new();
        let mut rest = path.split("::").peekable();
        match rest.next() {
            Some("crate") => {}
            Some("super") => {
                parts.extend(own_folder.iter().map(|s| s.to_string()));
                while rest.peek() == Some(&"super") {
                    rest.next();
                    parts.pop();
                }
            }
            _ => continue,
        }
        parts.extend(rest.filter(|p| !p.is_empty()).map(str::to_owned));
        while !parts.is_empty() {
            let candidate = parts.join("::");
            if files.contains_key(&candidate) {
                if candidate != module {
                    found.insert(candidate);
                }
                break;
            }
            parts.pop();
        }
    }
    found
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = modules(&src);
    files
        .iter()
        .map(|(m, code)| (m.clone(), imports(m, code, &files)))
        .collect()
}

#[test]
fn no_import_points_up_a_layer() {
    let mut upward = Vec::new();
    for (from, targets) in graph() {
        for to in targets {
            // A folder's mod.rs declares its children; that is not an import.
            if to.starts_with(&format!("{from}::")) || from == "lib" {
                continue;
            }
            if layer(&to) > layer(&from) {
                upward.push(format!("{from} -> {to}"));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports pointing up a layer:\n{}",
        upward.join("\n")
    );
}

#[test]
fn no_files_import_each_other_in_a_circle() {
    let graph = graph();
    // Depth-first search for a back edge; the path found is reported.
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(node.to_owned(), 1);
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            // Parents declaring children (mod.rs) are not imports.
            if next.starts_with(&format!("{node}::")) || node == "lib" {
                continue;
            }
            match state.get(next.as_str()) {
                Some(1) => {
                    let start = path.iter().position(|p| p == next).unwrap_or(0);
                    let mut cycle = path[start..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Some(_) => {}
                None => {
                    if let Some(cycle) = visit(next, graph, state, path) {
                        return Some(cycle);
                    }
                }
            }
        }
        path.pop();
        state.insert(node.to_owned(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if !state.contains_key(node) {
            let cycle = visit(node, &graph, &mut state, &mut Vec::new());
            assert!(
                cycle.is_none(),
                "import cycle: {}",
                cycle.unwrap().join(" -> ")
            );
        }
    }
}

#[test]
fn the_checker_sees_a_cycle_and_an_upward_import() {
    // The reading itself, on a made-up crate: `local::a` importing the
    // cluster is upward, and a and b import each other.
    let files: BTreeMap<String, String> = [
        (
            "local::a".to_owned(),
            "use crate::cluster::b::X;".to_owned(),
        ),
        (
            "cluster::b".to_owned(),
            "use crate::local::a::Y;".to_owned(),
        ),
        ("cluster".to_owned(), "pub mod b;".to_owned()),
    ]
    .into();
    let a = imports("local::a", &files["local::a"], &files);
    assert_eq!(a, BTreeSet::from(["cluster::b".to_owned()]));
    assert!(layer("cluster::b") > layer("local::a"));
    let b = imports("cluster::b", &files["cluster::b"], &files);
    assert_eq!(b, BTreeSet::from(["local::a".to_owned()]));
}
