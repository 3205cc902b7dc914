//! What changed between two versions of a tool's schemas or requirements, and what each change
//! means for its callers.
//!
//! Written for the shapes the schema policy emits (objects with `properties`/`required`/
//! `additionalProperties`, arrays with `items`, `type` lists for nullable values, `enum`/`const`,
//! numeric and length bounds, `pattern`/`format`, and `oneOf`/`anyOf` of tagged variants).
//! `json-schema-diff` (getsentry) was the candidate; it reads schemars 0.8's types (a second
//! schemars in every build), ignores `enum`, `pattern`, lengths and item counts, does not see
//! `additionalProperties` closing, and judges every change as if the schema were an input.
//! Anything this walk does not know counts as breaking and says so.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

/// What a change costs the callers of a published version: ordered, so the worst of several is
/// their `max`.
///
/// ```
/// use oxp_runtime::lock::Class;
/// let changes = [Class::Description, Class::Breaking, Class::Additive];
/// assert_eq!(changes.into_iter().max(), Some(Class::Breaking));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// Text only (descriptions, titles, examples): no call or value changes.
    Description,
    /// Everything that worked still works; there is more.
    Additive,
    /// A call that was valid may be refused or behave differently, or a value callers relied on
    /// may be missing.
    Breaking,
}

/// Which side of the tool a schema describes: the same change narrows what a caller may send
/// and what it may receive, and those cost callers opposite things.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    Input,
    Output,
}

/// What a change does to the set of values the schema accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Effect {
    /// Fewer values: breaking for inputs, additive for outputs.
    Narrows,
    /// More values: additive for inputs, breaking for outputs.
    Widens,
    /// Breaking both ways (a property removed, a type replaced).
    Breaks,
    /// Additive both ways (a new optional property).
    Adds,
    /// Text only.
    Annotates,
    /// Not classified: counted as breaking.
    Unclear,
}

impl Effect {
    fn class(self, direction: Direction) -> Class {
        match (self, direction) {
            (Effect::Annotates, _) => Class::Description,
            (Effect::Adds, _)
            | (Effect::Narrows, Direction::Output)
            | (Effect::Widens, Direction::Input) => Class::Additive,
            _ => Class::Breaking,
        }
    }
}

/// One change: where (a JSON pointer into the new definition, or the old one for what is gone),
/// what, and its class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Difference {
    pub pointer: String,
    pub change: String,
    pub class: Class,
}

/// The keywords that are text for readers, not constraints.
const ANNOTATIONS: [&str; 3] = ["description", "title", "examples"];
/// Bounds where a larger value admits fewer values.
const LOWER_BOUNDS: [&str; 5] = [
    "minimum",
    "exclusiveMinimum",
    "minLength",
    "minItems",
    "minProperties",
];
/// Bounds where a smaller value admits fewer values.
const UPPER_BOUNDS: [&str; 5] = [
    "maximum",
    "exclusiveMaximum",
    "maxLength",
    "maxItems",
    "maxProperties",
];
/// Constraints that can only be added, removed, or changed beyond comparison.
const OPAQUE: [&str; 3] = ["pattern", "format", "multipleOf"];
/// Keywords handled by name below.
const STRUCTURAL: [&str; 10] = [
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "oneOf",
    "anyOf",
    "uniqueItems",
];

struct Walk {
    direction: Direction,
    found: Vec<Difference>,
}

/// Compares two schemas (`None`: no schema, e.g. a tool that returns nothing).
pub(crate) fn schemas(
    old: Option<&Value>,
    new: Option<&Value>,
    direction: Direction,
) -> Vec<Difference> {
    let mut walk = Walk {
        direction,
        found: Vec::new(),
    };
    match (old, new) {
        (Some(old), Some(new)) => walk.schema(old, new, ""),
        (None, Some(_)) => walk.note("", "a value where there was none".into(), Effect::Narrows),
        (Some(_), None) => walk.note("", "no value where there was one".into(), Effect::Breaks),
        (None, None) => {}
    }
    walk.found
}

impl Walk {
    fn note(&mut self, pointer: &str, change: String, effect: Effect) {
        self.found.push(Difference {
            pointer: pointer.to_owned(),
            change,
            class: effect.class(self.direction),
        });
    }

    fn schema(&mut self, old: &Value, new: &Value, at: &str) {
        if old == new {
            return;
        }
        let (Value::Object(old), Value::Object(new)) = (old, new) else {
            return self.note(
                at,
                format!("{} → {}", short(old), short(new)),
                Effect::Unclear,
            );
        };
        for key in ANNOTATIONS {
            if old.get(key) != new.get(key) {
                self.note(at, format!("{key} changed"), Effect::Annotates);
            }
        }
        self.default(old.get("default"), new.get("default"), at);
        self.types(old, new, at);
        self.values(old, new, at);
        self.bounds(old, new, at);
        self.object(old, new, at);
        if let (Some(o), Some(n)) = (old.get("items"), new.get("items")) {
            self.schema(o, n, &format!("{at}/items"));
        } else if old.get("items") != new.get("items") {
            self.note(at, "`items` added or removed".into(), Effect::Unclear);
        }
        for key in ["oneOf", "anyOf"] {
            self.variants(key, old.get(key), new.get(key), at);
        }
        let known = |k: &str| {
            ANNOTATIONS.contains(&k)
                || LOWER_BOUNDS.contains(&k)
                || UPPER_BOUNDS.contains(&k)
                || OPAQUE.contains(&k)
                || STRUCTURAL.contains(&k)
                || k == "default"
        };
        let keys: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
        for key in keys.into_iter().filter(|k| !known(k)) {
            if old.get(key) != new.get(key) {
                self.note(
                    at,
                    format!("`{key}` changed, which this check cannot classify"),
                    Effect::Unclear,
                );
            }
        }
    }

    fn default(&mut self, old: Option<&Value>, new: Option<&Value>, at: &str) {
        if old == new {
            return;
        }
        let what = format!("default {} → {}", shown(old), shown(new));
        // A caller that leaves the value out now gets another one; in an output it is text.
        let effect = match self.direction {
            Direction::Input => Effect::Breaks,
            Direction::Output => Effect::Annotates,
        };
        self.note(at, what, effect);
    }

    fn types(&mut self, old: &Map<String, Value>, new: &Map<String, Value>, at: &str) {
        let (o, n) = (types(old.get("type")), types(new.get("type")));
        if o == n {
            return;
        }
        let what = format!(
            "type {} → {}",
            shown(old.get("type")),
            shown(new.get("type"))
        );
        let effect = match (&o, &n) {
            (None, Some(_)) => Effect::Narrows,
            (Some(_), None) => Effect::Widens,
            (Some(o), Some(n)) if covers(o, n) => Effect::Narrows,
            (Some(o), Some(n)) if covers(n, o) => Effect::Widens,
            _ => Effect::Breaks,
        };
        self.note(at, what, effect);
    }

    /// `enum` and `const`, read as one set of allowed values.
    fn values(&mut self, old: &Map<String, Value>, new: &Map<String, Value>, at: &str) {
        let (o, n) = (allowed(old), allowed(new));
        match (o, n) {
            (None, None) => {}
            (None, Some(n)) => {
                self.note(at, format!("now limited to {}", list(&n)), Effect::Narrows)
            }
            (Some(o), None) => self.note(
                at,
                format!("no longer limited to {}", list(&o)),
                Effect::Widens,
            ),
            (Some(o), Some(n)) => {
                for gone in o.iter().filter(|v| !n.contains(v)) {
                    self.note(at, format!("value {gone} removed"), Effect::Narrows);
                }
                for added in n.iter().filter(|v| !o.contains(v)) {
                    self.note(at, format!("value {added} added"), Effect::Widens);
                }
            }
        }
    }

    fn bounds(&mut self, old: &Map<String, Value>, new: &Map<String, Value>, at: &str) {
        for (keys, tighter_when_larger) in [(LOWER_BOUNDS, true), (UPPER_BOUNDS, false)] {
            for key in keys {
                let (o, n) = (old.get(key), new.get(key));
                if o == n {
                    continue;
                }
                let what = format!("{key} {} → {}", shown(o), shown(n));
                let effect = match (o.and_then(Value::as_f64), n.and_then(Value::as_f64)) {
                    (None, Some(_)) => Effect::Narrows,
                    (Some(_), None) => Effect::Widens,
                    (Some(o), Some(n)) if (n > o) == tighter_when_larger => Effect::Narrows,
                    (Some(_), Some(_)) => Effect::Widens,
                    (None, None) => Effect::Unclear,
                };
                self.note(at, what, effect);
            }
        }
        for key in OPAQUE {
            let (o, n) = (old.get(key), new.get(key));
            let effect = match (o, n) {
                _ if o == n => continue,
                (None, Some(_)) => Effect::Narrows,
                (Some(_), None) => Effect::Widens,
                _ => Effect::Unclear,
            };
            self.note(at, format!("{key} {} → {}", shown(o), shown(n)), effect);
        }
        let unique = |m: &Map<String, Value>| m.get("uniqueItems") == Some(&Value::Bool(true));
        if unique(old) != unique(new) {
            let effect = if unique(new) {
                Effect::Narrows
            } else {
                Effect::Widens
            };
            self.note(
                at,
                format!("uniqueItems {} → {}", unique(old), unique(new)),
                effect,
            );
        }
    }

    fn object(&mut self, old: &Map<String, Value>, new: &Map<String, Value>, at: &str) {
        let empty = Map::new();
        let props =
            |m: &Map<String, Value>| m.get("properties").and_then(Value::as_object).cloned();
        let (op, np) = (props(old), props(new));
        let (op, np) = (op.as_ref().unwrap_or(&empty), np.as_ref().unwrap_or(&empty));
        let (or, nr) = (required(old), required(new));
        for (name, schema) in op {
            let pointer = format!("{at}/properties/{}", escape(name));
            match np.get(name) {
                None => self.note(
                    &pointer,
                    format!("property `{name}` removed"),
                    Effect::Breaks,
                ),
                Some(new_schema) => {
                    match (or.contains(name.as_str()), nr.contains(name.as_str())) {
                        (false, true) => self.note(
                            &pointer,
                            format!("`{name}` optional → required"),
                            Effect::Narrows,
                        ),
                        (true, false) => self.note(
                            &pointer,
                            format!("`{name}` required → optional"),
                            Effect::Widens,
                        ),
                        _ => {}
                    }
                    self.schema(schema, new_schema, &pointer);
                }
            }
        }
        for name in np.keys().filter(|n| !op.contains_key(*n)) {
            let pointer = format!("{at}/properties/{}", escape(name));
            if nr.contains(name.as_str()) {
                self.note(
                    &pointer,
                    format!("new required property `{name}`"),
                    Effect::Narrows,
                );
            } else {
                self.note(
                    &pointer,
                    format!("new optional property `{name}`"),
                    Effect::Adds,
                );
            }
        }
        let (oa, na) = (
            old.get("additionalProperties"),
            new.get("additionalProperties"),
        );
        let closed = |v: Option<&Value>| v == Some(&Value::Bool(false));
        match (oa, na) {
            _ if oa == na => {}
            (Some(Value::Object(_)), Some(Value::Object(_))) => {
                self.schema(
                    oa.unwrap(),
                    na.unwrap(),
                    &format!("{at}/additionalProperties"),
                );
            }
            _ if !closed(oa) && closed(na) => {
                self.note(at, "additionalProperties closed".into(), Effect::Narrows);
            }
            _ if closed(oa) && !closed(na) => {
                self.note(at, "additionalProperties opened".into(), Effect::Widens);
            }
            _ => self.note(
                at,
                format!("additionalProperties {} → {}", shown(oa), shown(na)),
                Effect::Unclear,
            ),
        }
    }

    /// `oneOf`/`anyOf`: variants matched by their tag (a property or value fixed by `const`),
    /// by position when they have none.
    fn variants(&mut self, key: &str, old: Option<&Value>, new: Option<&Value>, at: &str) {
        if old == new {
            return;
        }
        let (Some(Value::Array(old)), Some(Value::Array(new))) = (old, new) else {
            return self.note(at, format!("`{key}` added or removed"), Effect::Unclear);
        };
        let (ot, nt) = (tags(old), tags(new));
        let (Some(ot), Some(nt)) = (ot, nt) else {
            if old.len() != new.len() {
                return self.note(
                    at,
                    format!(
                        "`{key}` has {} variants, was {}, and they carry no tag to match them by",
                        new.len(),
                        old.len()
                    ),
                    Effect::Unclear,
                );
            }
            for (i, (o, n)) in old.iter().zip(new).enumerate() {
                self.schema(o, n, &format!("{at}/{key}/{i}"));
            }
            return;
        };
        for (tag, i) in &ot {
            match nt.get(tag) {
                None => self.note(
                    &format!("{at}/{key}/{i}"),
                    format!("variant {tag} removed"),
                    Effect::Narrows,
                ),
                Some(j) => self.schema(&old[*i], &new[*j], &format!("{at}/{key}/{j}")),
            }
        }
        for (tag, j) in nt.iter().filter(|(t, _)| !ot.contains_key(*t)) {
            self.note(
                &format!("{at}/{key}/{j}"),
                format!("variant {tag} added"),
                Effect::Widens,
            );
        }
    }
}

/// Requirements (`secrets`, `user_id`, `authorization` with scopes): a new one refuses calls
/// that worked; one dropped refuses none.
pub(crate) fn requirements(old: &Value, new: &Value) -> Vec<Difference> {
    let mut found = Vec::new();
    let mut note = |pointer: String, change: String, class: Class| {
        found.push(Difference {
            pointer,
            change,
            class,
        })
    };
    let ids = |v: &Value, field: &str| -> BTreeSet<String> {
        v[field]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s["id"].as_str().map(str::to_owned))
            .collect()
    };
    let (os, ns) = (ids(old, "secrets"), ids(new, "secrets"));
    for id in ns.difference(&os) {
        note(
            format!("/secrets/{}", escape(id)),
            format!("new secret `{id}`"),
            Class::Breaking,
        );
    }
    for id in os.difference(&ns) {
        note(
            format!("/secrets/{}", escape(id)),
            format!("secret `{id}` no longer needed"),
            Class::Additive,
        );
    }
    let user = |v: &Value| v["user_id"] == Value::Bool(true);
    if user(old) != user(new) {
        let (change, class) = if user(new) {
            ("now needs a user_id", Class::Breaking)
        } else {
            ("no longer needs a user_id", Class::Additive)
        };
        note("/user_id".into(), change.into(), class);
    }
    let scopes = |v: &Value| -> BTreeMap<String, BTreeSet<String>> {
        v["authorization"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| {
                let scopes = a["oauth2"]["scopes"].as_array().into_iter().flatten();
                Some((
                    a["id"].as_str()?.to_owned(),
                    scopes
                        .filter_map(|s| s.as_str().map(str::to_owned))
                        .collect(),
                ))
            })
            .collect()
    };
    let (oa, na) = (scopes(old), scopes(new));
    for (id, new_scopes) in &na {
        let pointer = format!("/authorization/{}", escape(id));
        let Some(old_scopes) = oa.get(id) else {
            note(
                pointer,
                format!("new authorization provider `{id}`"),
                Class::Breaking,
            );
            continue;
        };
        for scope in new_scopes.difference(old_scopes) {
            note(
                pointer.clone(),
                format!("new scope `{scope}`"),
                Class::Breaking,
            );
        }
        for scope in old_scopes.difference(new_scopes) {
            note(
                pointer.clone(),
                format!("scope `{scope}` no longer needed"),
                Class::Additive,
            );
        }
    }
    for id in oa.keys().filter(|id| !na.contains_key(*id)) {
        note(
            format!("/authorization/{}", escape(id)),
            format!("authorization `{id}` no longer needed"),
            Class::Additive,
        );
    }
    found
}

/// The scopes a caller's token needs (`scopes = [..]` on a tool, resource or prompt): a new one
/// refuses callers that were served; one dropped refuses none.
pub(crate) fn caller_scopes(old: &Value, new: &Value) -> Vec<Difference> {
    let set = |v: &Value| -> BTreeSet<String> {
        v["scopes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect()
    };
    let (old, new) = (set(old), set(new));
    let added = new.difference(&old).map(|scope| Difference {
        pointer: format!("/scopes/{}", escape(scope)),
        change: format!("callers now need scope `{scope}`"),
        class: Class::Breaking,
    });
    let dropped = old.difference(&new).map(|scope| Difference {
        pointer: format!("/scopes/{}", escape(scope)),
        change: format!("callers no longer need scope `{scope}`"),
        class: Class::Additive,
    });
    added.chain(dropped).collect()
}

/// The `type` keyword as a set (`None`: any type).
fn types(value: Option<&Value>) -> Option<BTreeSet<String>> {
    match value? {
        Value::String(t) => Some(BTreeSet::from([t.clone()])),
        Value::Array(ts) => Some(
            ts.iter()
                .filter_map(|t| t.as_str().map(str::to_owned))
                .collect(),
        ),
        _ => None,
    }
}

/// Whether every value of types `inner` is a value of types `outer` (an integer is a number).
fn covers(outer: &BTreeSet<String>, inner: &BTreeSet<String>) -> bool {
    inner
        .iter()
        .all(|t| outer.contains(t) || (t == "integer" && outer.contains("number")))
}

fn allowed(schema: &Map<String, Value>) -> Option<Vec<Value>> {
    match (schema.get("enum"), schema.get("const")) {
        (Some(Value::Array(values)), _) => Some(values.clone()),
        (_, Some(value)) => Some(vec![value.clone()]),
        _ => None,
    }
}

/// The names a schema requires: the schema policy's one reading of `required`, as a set.
fn required(schema: &Map<String, Value>) -> BTreeSet<String> {
    crate::schema::required(schema).into_iter().collect()
}

/// Each variant's tag and position: the value of the property every variant fixes with a
/// `const` (internally and adjacently tagged enums), the variant's own `const` (unit variants),
/// or its one required property (externally tagged). `None` when the variants have no such tag.
fn tags(variants: &[Value]) -> Option<BTreeMap<String, usize>> {
    let tag = |variant: &Value| -> Option<String> {
        if let Some(value) = variant.get("const") {
            return Some(value.to_string());
        }
        let properties = variant.get("properties")?.as_object()?;
        let fixed = properties
            .iter()
            .find_map(|(name, p)| p.get("const").map(|v| format!("{name} = {v}")));
        fixed.or_else(|| match variant.get("required")?.as_array()?.as_slice() {
            [only] if properties.len() == 1 => Some(format!("`{}`", only.as_str()?)),
            _ => None,
        })
    };
    let tagged: Option<BTreeMap<String, usize>> = variants
        .iter()
        .enumerate()
        .map(|(i, v)| Some((tag(v)?, i)))
        .collect();
    tagged.filter(|t| t.len() == variants.len())
}

/// A JSON pointer segment (RFC 6901).
fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

fn shown(value: Option<&Value>) -> String {
    value.map_or_else(|| "(none)".to_owned(), short)
}

/// A value as the lines show it: `number`, `["string","null"]`, `10`; long ones cut.
fn short(value: &Value) -> String {
    let text = match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if text.chars().count() > 60 {
        format!("{}…", text.chars().take(59).collect::<String>())
    } else {
        text
    }
}

fn list(values: &[Value]) -> String {
    values
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
