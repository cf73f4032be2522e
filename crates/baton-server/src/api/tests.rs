//! The API's OpenAPI description, checked across its modules.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

/// utoipa keeps one schema per name, silently: two modules naming different types alike would
/// leave one route described by the other's type. Every name must mean one schema.
#[test]
fn schema_names_are_unique_across_modules() {
    let modules = [
        ("runs", super::runs::routes()),
        ("history", super::history::routes()),
        ("context", super::context::routes()),
        ("compaction", super::compaction::routes()),
        ("summaries", super::summaries::routes()),
        ("working", super::working::routes()),
        ("ops", super::ops::routes()),
        ("cache", super::cache::routes()),
        ("reports", super::reports::routes()),
    ];
    let mut seen: BTreeMap<String, (&str, serde_json::Value)> = BTreeMap::new();
    for (module, routes) in modules {
        let doc = routes.split_for_parts().1;
        let Some(components) = doc.components else {
            continue;
        };
        for (name, schema) in components.schemas {
            let schema = serde_json::to_value(schema).unwrap();
            if let Some((first, earlier)) = seen.get(&name) {
                assert_eq!(
                    earlier, &schema,
                    "schema {name} of {module} differs from {first}'s"
                );
            } else {
                seen.insert(name, (module, schema));
            }
        }
    }
    assert!(seen.len() > 10, "{:?}", seen.keys());
}
