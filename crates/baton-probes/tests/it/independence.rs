//! The probes grade the extractor in `baton-compact`, so neither may depend on the other:
//! this crate's manifest, followed through every workspace crate it reaches, never names
//! `baton-compact`, and `baton-compact`'s never names this crate.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use toml::Value;

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The dependency names a manifest lists in `sections` (also under `[target.*]`).
fn dependencies(name: &str, sections: &[&str]) -> BTreeSet<String> {
    let path = crates_dir().join(name).join("Cargo.toml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let manifest: Value = toml::from_str(&text).unwrap();
    let mut tables: Vec<&Value> = sections.iter().filter_map(|s| manifest.get(*s)).collect();
    if let Some(targets) = manifest.get("target").and_then(Value::as_table) {
        for target in targets.values() {
            tables.extend(sections.iter().filter_map(|s| target.get(*s)));
        }
    }
    tables
        .into_iter()
        .filter_map(Value::as_table)
        .flat_map(|t| t.keys().cloned())
        .collect()
}

#[test]
fn the_probes_never_reach_the_extractor_they_grade() {
    const ALL: [&str; 3] = ["dependencies", "dev-dependencies", "build-dependencies"];
    const BUILD: [&str; 2] = ["dependencies", "build-dependencies"];
    let mut reached: BTreeSet<String> = BTreeSet::new();
    let mut queue: Vec<(String, Vec<String>)> = dependencies("baton-probes", &ALL)
        .into_iter()
        .map(|d| (d.clone(), vec!["baton-probes".to_owned(), d]))
        .collect();
    while let Some((name, path)) = queue.pop() {
        assert_ne!(
            name,
            "baton-compact",
            "baton-probes reaches baton-compact through {}",
            path.join(" -> ")
        );
        if !name.starts_with("baton-") || !reached.insert(name.clone()) {
            continue;
        }
        for dep in dependencies(&name, &BUILD) {
            let mut p = path.clone();
            p.push(dep.clone());
            queue.push((dep, p));
        }
    }
    assert!(reached.contains("baton-core"), "reached {reached:?}");
    assert!(
        !dependencies("baton-compact", &ALL).contains("baton-probes"),
        "baton-compact must not use the probes that grade it"
    );
}
