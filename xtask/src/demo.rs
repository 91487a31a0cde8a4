//! `cargo xtask demo`: the main job. Runs `ofi-info` (the stack's capability listing)
//! once the `hosted` crate has it; until then it says honestly what is there.

use crate::cmd::{self, Result};
use crate::ws::Workspace;

/// Runs `ofi-info`, or prints the crate and wire-protocol summary if it does not exist.
pub fn run(ws: &Workspace) -> Result {
    if ws.has_ofi_info() {
        return cmd::run(&mut ws.cargo(["run", "--release", "-p", "hosted", "--bin", "ofi-info"]));
    }
    println!("ofi-nostd demo: the `ofi-info` capability listing does not exist yet");
    println!("(it arrives with the core-objects issue as crates/hosted/src/bin/ofi-info.rs).");
    println!();
    println!("What the workspace holds today, one crate per layer:");
    for (name, description) in members(ws) {
        println!("  {name:<14} {description}");
    }
    println!();
    print_wire_summary(ws);
    println!("Feature status per milestone: docs/status.md");
    Ok(())
}

/// `(name, description)` of every workspace member, in the order of the root manifest.
fn members(ws: &Workspace) -> Vec<(String, String)> {
    let root = std::fs::read_to_string(ws.path("Cargo.toml")).unwrap_or_default();
    member_dirs(&root)
        .iter()
        .filter_map(|dir| std::fs::read_to_string(ws.path(dir).join("Cargo.toml")).ok())
        .map(|m| {
            (
                field(&m, "name").unwrap_or_default(),
                field(&m, "description").unwrap_or_default(),
            )
        })
        .collect()
}

/// The directories listed in `members = [...]` of a workspace manifest.
fn member_dirs(manifest: &str) -> Vec<String> {
    let Some(start) = manifest.find("members") else {
        return Vec::new();
    };
    let list = &manifest[start..];
    let list = &list[list.find('[').map_or(0, |i| i + 1)..list.find(']').unwrap_or(list.len())];
    list.split(',')
        .map(|s| s.trim().trim_matches('"').to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// The string value of `key = "..."` in a manifest's first section that has it.
fn field(manifest: &str, key: &str) -> Option<String> {
    manifest.lines().find_map(|line| {
        let (k, v) = line.split_once('=')?;
        (k.trim() == key).then(|| v.trim().trim_matches('"').to_string())
    })
}

/// The title and first paragraph of docs/wire-protocol.md, if it exists.
fn print_wire_summary(ws: &Workspace) {
    let Ok(doc) = std::fs::read_to_string(ws.path("docs/wire-protocol.md")) else {
        println!("Wire protocol: docs/wire-protocol.md is not written yet.");
        return;
    };
    let mut lines = doc.lines().skip_while(|l| l.trim().is_empty());
    let title = lines
        .next()
        .unwrap_or_default()
        .trim_start_matches('#')
        .trim();
    if title.is_empty() {
        println!("Wire protocol: docs/wire-protocol.md (empty so far).");
        println!();
        return;
    }
    println!("Wire protocol: {title} (docs/wire-protocol.md)");
    let paragraph: Vec<&str> = lines
        .skip_while(|l| l.trim().is_empty())
        .take_while(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .collect();
    for line in paragraph {
        println!("  {}", line.trim());
    }
    println!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_members_and_fields() {
        let root = "[workspace]\nmembers = [\n    \"crates/wire\",\n    \"xtask\",\n]\nexclude = [\"x\"]\n";
        assert_eq!(member_dirs(root), ["crates/wire", "xtask"]);
        let m = "[package]\nname = \"wire\"\ndescription = \"formats\"\n";
        assert_eq!(field(m, "name").as_deref(), Some("wire"));
        assert_eq!(field(m, "description").as_deref(), Some("formats"));
        assert_eq!(field(m, "license"), None);
    }

    #[test]
    fn lists_this_workspace() {
        let names: Vec<String> = members(&Workspace::locate())
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert!(names.iter().any(|n| n == "xtask"));
    }
}
